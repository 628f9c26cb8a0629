package undo

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
)

// ObjectUIDAnnotation is the annotation in which vcluster records, on a host object, the uid
// of the virtual object it was synced from (set before CreatePhysical; the syncer never copies
// a tenant's value of it). A physical-side seal is bound to it.
const ObjectUIDAnnotation = "vcluster.loft.sh/object-uid"

// identityOf returns the Identity a seal on the JSON object raw of kind gvk on side is bound
// to (IdentityIn of its metadata).
func identityOf(gvk schema.GroupVersionKind, side Side, raw []byte) Identity {
	meta, _, ok := jsonscan.Find(raw, "metadata")
	if !ok {
		return IdentityIn(gvk, side, nil)
	}
	return IdentityIn(gvk, side, meta.Value)
}

// Meta is what of an object's metadata its Identity is made of: its namespace, name,
// generateName, metadata.uid, vcluster's ObjectUIDAnnotation and creationTimestamp (Unix
// seconds; 0: none), as a caller that parsed the metadata already has them.
type Meta struct {
	Namespace, Name, GenerateName, UID, ObjectUID string
	Created                                       int64
}

// Identity returns the Identity a seal on an object of kind gvk on side with metadata m is
// bound to: gvk's apiVersion and kind (the caller made sure the object says the same), m's
// namespace, name, generateName and creation time, and its uid: on the physical side vcluster's
// ObjectUIDAnnotation where it is set (the virtual object's uid, there from the Create on and
// the same on every later write), else metadata.uid; on the virtual side metadata.uid. The uid
// is "" where none exists yet (a Create): Seal then binds the name (BindName) or generateName,
// and the next write seals with the uid.
func (m Meta) Identity(gvk schema.GroupVersionKind, side Side) Identity {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	id := Identity{
		APIVersion: apiVersion, Kind: kind, Namespace: m.Namespace, Name: m.Name, GenerateName: m.GenerateName,
		UID: m.UID, UIDSource: UIDFromMetadata, Created: m.Created,
	}
	if side == Physical && m.ObjectUID != "" {
		id.UID, id.UIDSource = m.ObjectUID, UIDFromObjectUID
	}
	return id
}

// IdentityIn is Meta.Identity of the object whose metadata member is meta (JSON; nil: none,
// whose Identity is gvk's apiVersion and kind alone).
func IdentityIn(gvk schema.GroupVersionKind, side Side, meta []byte) Identity {
	if meta == nil {
		apiVersion, kind := gvk.ToAPIVersionAndKind()
		return Identity{APIVersion: apiVersion, Kind: kind}
	}
	var m Meta
	jsonscan.ScanObject(meta, func(key, rest []byte) int {
		name := jsonscan.MemberName(key)
		if string(name) == "annotations" { // its members read on the way past it: one pass
			if n := m.readAnnotations(rest); n >= 0 {
				return n
			}
		}
		end := jsonscan.SkipValue(rest, 0)
		m.read(string(name), rest[:end])
		return end
	})
	return m.Identity(gvk, side)
}

// MetaMembers are the members of a metadata object that its Identity is made of, as JSON
// literals (nil: absent): for a caller whose scan of the metadata read them already, each key
// there once.
type MetaMembers struct {
	Namespace, Name, GenerateName, UID, CreationTimestamp, Annotations []byte
}

// Identity is IdentityIn of a metadata object (present) whose members are mm.
func (mm MetaMembers) Identity(gvk schema.GroupVersionKind, side Side) Identity {
	var m Meta
	m.read("namespace", mm.Namespace)
	m.read("name", mm.Name)
	m.read("generateName", mm.GenerateName)
	m.read("uid", mm.UID)
	m.read("creationTimestamp", mm.CreationTimestamp)
	if mm.Annotations != nil {
		m.readAnnotations(mm.Annotations)
	}
	return m.Identity(gvk, side)
}

// readAnnotations reads vcluster's ObjectUIDAnnotation in the annotations object at the start
// of rest into m (the last of that key) and returns the object's length (jsonscan.ScanObject:
// -1 when rest is no object).
func (m *Meta) readAnnotations(rest []byte) int {
	return jsonscan.ScanObject(rest, func(key, rest []byte) int {
		end := jsonscan.SkipValue(rest, 0)
		if keyIs(key, ObjectUIDAnnotation) {
			m.ObjectUID, _ = jsonscan.String(rest[:end])
		}
		return end
	})
}

// read reads the metadata member name's value v (a JSON literal; nil: absent, nothing read)
// into m, where an Identity is made of it.
func (m *Meta) read(name string, v []byte) {
	switch name {
	case "creationTimestamp":
		if s, ok := jsonscan.String(v); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				m.Created = t.Unix()
			}
		}
	case "namespace":
		m.Namespace, _ = jsonscan.String(v)
	case "name":
		m.Name, _ = jsonscan.String(v)
	case "generateName":
		m.GenerateName, _ = jsonscan.String(v)
	case "uid":
		m.UID, _ = jsonscan.String(v)
	}
}

// keyIs reports whether the member key literal lit denotes name (as jsonscan.Find matches it).
func keyIs(lit []byte, name string) bool {
	if text, plain := jsonscan.PlainText(lit); plain {
		return string(text) == name
	}
	s, _ := jsonscan.String(lit)
	return s == name
}

// SubjectOf returns the stored JSON object raw of kind gvk on side, read as doc (a
// jsondoc.Doc of raw), as a plan sees it (SubjectIn).
func SubjectOf(gvk schema.GroupVersionKind, side Side, raw []byte, doc *jsondoc.Doc) Subject {
	m, _, _ := jsonscan.Find(raw, "immutable")
	return SubjectIn(identityOf(gvk, side, raw), gvk, side, string(m.Value), doc)
}

// SubjectIn is the Subject of the object id of kind gvk on side, whose top-level immutable
// member is immutable (its JSON text; "" when absent: only "true" makes it a Secret or
// ConfigMap whose data the apiserver will not let anyone change), read as doc.
func SubjectIn(id Identity, gvk schema.GroupVersionKind, side Side, immutable string, doc Doc) Subject {
	return Subject{GVK: gvk, ID: id, Side: side, Immutable: immutable == "true", Doc: func() (Doc, error) { return doc, nil }}
}
