package engine

// Sealed undo: how the engine uses package undo.
//
// The one rule: an undo is applied only if it is sealed and opens under synchook's key, bound
// to the object it was written for (package undo: identity, side and uid or generateName) — on
// reads, on a write's own-undo step and in cleanup. Anything else in UndoAnnotation (clear
// text, a value that does not open, a seal of another object) is tenant data: counted, never
// applied, and a write removes it before its hooks run and records it in the new undo like any
// other value the tenant wrote there, so the read gives the syncer back what it sent.
//
// A write chain seals its undo with the newest key; without a key (a vcluster plugin v2 whose
// host is not reachable yet) a write that would record an undo fails with ErrUndoNeedsKey and
// writes nothing. A read applies an undo that opens, whatever hooks are configured now, without
// running any chain again. Which entries it applies follows undo.Restorable: all of them when
// the kind's Update chain of the same side has every hook of the chain that wrote them (same
// names, same revisions: its next write puts the change back), otherwise only those the
// apiserver lets the syncer change back on an update (labels, annotations, Secret and ConfigMap
// data); the others stay recorded (carried, marked Kept).
//
// No nesting: an Update that brings an undo that opens applies it first, under the same rule,
// and records only the new change. A Create never does (a legitimate Create never carries
// synchook's seal: what it brings is the tenant's).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// ErrUndoNeedsKey is the cause of a HookError when synchook holds no undo key (a vcluster
// plugin v2 before its key Secret could be read) and a write chain changed the object, so its
// undo would have to be written: the write is refused (transports answer it as a failed
// precondition; vcluster retries) rather than written with an undo no read could trust.
var ErrUndoNeedsKey = errors.New("no undo key loaded yet: a hooked write cannot record its undo")

// More reasons for which a read drops an UndoAnnotation (UndoObserver).
const (
	// UndoUnauthentic: undo.ReasonUnauthentic.
	UndoUnauthentic = undo.ReasonUnauthentic
	// UndoNoKey: undo.ReasonNoKey.
	UndoNoKey = undo.ReasonNoKey
	// UndoClearText: undo.ReasonClearText.
	UndoClearText = undo.ReasonClearText
)

// ring returns the key ring in use, or nil without a key.
func (r *Registry) ring() *undo.Ring { return r.opts.Keys.Ring() }

// sideOf returns the cluster the objects of hook type t live in, as undo names it (the same
// strings: TestSideNames).
func sideOf(t hooks.HookType) undo.Side { return undo.Side(t.Side()) }

// ObjectUIDAnnotation is the annotation in which vcluster records, on a host object, the uid
// of the virtual object it was synced from (set before CreatePhysical; the syncer never copies
// a tenant's value of it). A physical-side seal is bound to it.
const ObjectUIDAnnotation = "vcluster.loft.sh/object-uid"

// objectIdentity returns the identity a sealed undo of the JSON object raw of kind gvk on side
// is bound to: gvk's apiVersion and kind (checkInput made sure the object says the same), its
// namespace, name, generateName and uid (uidOf).
func objectIdentity(gvk schema.GroupVersionKind, side undo.Side, raw []byte) undo.Identity {
	meta, _, ok := jsonscan.Find(raw, "metadata")
	if !ok {
		return identityIn(gvk, side, nil)
	}
	return identityIn(gvk, side, meta.Value)
}

// identityIn is objectIdentity from the object's metadata member meta (nil: none).
func identityIn(gvk schema.GroupVersionKind, side undo.Side, meta []byte) undo.Identity {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	id := undo.Identity{APIVersion: apiVersion, Kind: kind}
	if meta == nil {
		return id
	}
	var uid, objectUID string
	jsonscan.EachMember(meta, func(key, v []byte) bool {
		switch string(memberName(key)) {
		case "creationTimestamp":
			if s, ok := jsonscan.String(v); ok {
				if t, err := time.Parse(time.RFC3339, s); err == nil {
					id.Created = t.Unix()
				}
			}
		case "namespace":
			id.Namespace, _ = jsonscan.String(v)
		case "name":
			id.Name, _ = jsonscan.String(v)
		case "generateName":
			id.GenerateName, _ = jsonscan.String(v)
		case "uid":
			uid, _ = jsonscan.String(v)
		case "annotations":
			if m, _, ok := jsonscan.Find(v, ObjectUIDAnnotation); ok {
				objectUID, _ = jsonscan.String(m.Value)
			}
		}
		return true
	})
	id.UID, id.UIDSource = uidOf(side, uid, objectUID)
	return id
}

// uidOf returns the uid a seal on side is bound to and where it comes from: on the physical
// side vcluster's ObjectUIDAnnotation where it is set (the virtual object's uid, there from the
// Create on and the same on every later write), else metadata.uid; on the virtual side
// metadata.uid. "" where neither exists yet (a Create): the seal is then bound to the name
// (undo.BindName) or generateName and the next write seals it with the uid.
func uidOf(side undo.Side, uid, objectUID string) (string, undo.UIDSource) {
	if side == undo.Physical && objectUID != "" {
		return objectUID, undo.UIDFromObjectUID
	}
	return uid, undo.UIDFromMetadata
}

// hookDigest returns the fingerprint of one hook of a write chain (its name and revision),
// which a sealed undo lists for every hook of the chain that recorded it (undo.Record.Writers).
func hookDigest(name, revision string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s;%d:%s;", len(name), name, len(revision), revision))
	return hex.EncodeToString(sum[:4])
}

// sealUndo returns the annotation value for entries recorded by the write chain c on the
// object raw (either side of the change: identity never changes), after the carried entries
// carry: sealed with the newest key. Errors: ErrUndoNeedsKey without a key, ErrUndoTooLarge
// past MaxUndoBytes (counted as stored).
func (r *call) sealUndo(c *chain, raw []byte, entries []UndoEntry, carry []UndoEntry) (string, error) {
	return r.reg.sealUndoAs(c, func() undo.Identity {
		meta, _ := r.metadataOf(raw)
		return identityIn(c.key.GVK, sideOf(c.key.Type), meta)
	}, entries, carry)
}

// sealUndoFor is sealUndo for an object whose identity is known (the label/annotation fast
// path has it from its own parse).
func (r *Registry) sealUndoFor(c *chain, id undo.Identity, entries []UndoEntry, carry []UndoEntry) (string, error) {
	return r.sealUndoAs(c, func() undo.Identity { return id }, entries, carry)
}

// sealUndoAs is sealUndo with the object's identity from id, which is called only to seal.
func (r *Registry) sealUndoAs(c *chain, id func() undo.Identity, entries []UndoEntry, carry []UndoEntry) (string, error) {
	ring := r.ring()
	if ring == nil {
		return "", ErrUndoNeedsKey
	}
	if len(carry) > 0 {
		entries = append(slices.Clip(carry), entries...)
	}
	value, err := ring.Seal(id(), sideOf(c.key.Type), undo.Record{Writers: c.writers, Entries: entries})
	if err != nil {
		return "", err
	}
	r.opts.Keys.NoteSealed(c.key.GVK, sideOf(c.key.Type))
	if len(value) > r.opts.MaxUndoBytes {
		return "", fmt.Errorf("%w: %d bytes as stored, the limit is %d", ErrUndoTooLarge, len(value), r.opts.MaxUndoBytes)
	}
	return value, nil
}

// rule returns the one rule's inputs for the chains of key's kind and side (undo.Rule).
func (r *Registry) rule(key Key) undo.Rule {
	return undo.Rule{Ring: r.ring(), MaxBytes: r.opts.MaxUndoBytes, Rewrites: func(writers []string) bool { return r.rewrites(key, writers) }}
}

// subject returns the stored object raw of the chain key's kind and side as undo's plans see it.
func subject(key Key, raw []byte) undo.Subject {
	side := sideOf(key.Type)
	return undo.Subject{
		GVK: key.GVK, ID: objectIdentity(key.GVK, side, raw), Side: side, Immutable: isImmutable(raw),
		Doc: func() (undo.Doc, error) { return jsondoc.New(raw), nil },
	}
}

// subjectOf is subject for the object raw of the call, read from what checkInput found when raw
// is the request's object (no scan of the whole object), with doc as its Doc.
func (r *call) subjectOf(key Key, raw []byte, doc *jsondoc.Doc) undo.Subject {
	side := sideOf(key.Type)
	meta, _ := r.metadataOf(raw)
	immutable := false
	if v, ok := r.indexOf(raw).Lookup("/immutable"); ok {
		immutable = string(v) == "true"
	}
	return undo.Subject{
		GVK: key.GVK, ID: identityIn(key.GVK, side, meta), Side: side, Immutable: immutable,
		Doc: func() (undo.Doc, error) { return doc, nil },
	}
}

// undoAnnotationOf is undoAnnotation for the object raw of the call, read in its metadata
// (metadataOf).
func (r *call) undoAnnotationOf(raw []byte) (string, bool) {
	meta, ok := r.metadataOf(raw)
	if !ok {
		return "", false
	}
	return undoAnnotationIn(meta)
}

// rewrites reports whether the Update chain of the side of key records undo and has every
// hook of writers (same name, same revision): its next write puts back whatever the undo takes
// off.
func (r *Registry) rewrites(key Key, writers []string) bool {
	wc := r.chains[Key{GVK: key.GVK, Type: key.Type.UpdateOf()}]
	if wc == nil || !r.recordsUndo(wc) || len(writers) == 0 {
		return false
	}
	for _, w := range writers {
		if !slices.Contains(wc.writers, w) {
			return false
		}
	}
	return true
}

// isImmutable reports whether the JSON object raw says immutable: true (a Secret or ConfigMap
// whose data the apiserver will not let anyone change).
func isImmutable(raw []byte) bool {
	m, _, ok := jsonscan.Find(raw, "immutable")
	return ok && string(m.Value) == "true"
}

// undoMarker is how a JSON object that carries an UndoAnnotation contains its key: a cheap
// test before looking for it.
var undoMarker = []byte(`"` + UndoAnnotation + `"`)

// ownUndo is undo's write plan (undo.Rule.PlanWrite) for the write chain c and the object raw
// of the call it is given: the undo synchook itself wrote there, which the write applies first. ok is false
// when raw carries none (on a Create, always): whatever is there is the tenant's.
func (r *call) ownUndo(c *chain, raw []byte) (steps []undo.Step, carry []UndoEntry, ok bool) {
	value, had := r.undoAnnotationOf(raw) // runChain's caller gate (mayCarryUndo) looked for the marker
	if !had {
		return nil, nil, false
	}
	read, _ := c.key.Type.ReadOf() // runChain calls ownUndo for a Create or an Update only
	readKey := Key{GVK: c.key.GVK, Type: read}
	update := c.key.Type.Op() == hooks.OpUpdate
	p, ok := r.reg.rule(readKey).PlanWrite(update, r.subjectOf(readKey, raw, jsondoc.New(raw)), value)
	return p.Steps, p.Carry, ok
}

// sealOnto records the undo of ops — the patch of raw that the write chain c's hooks made, out
// being the hooked typed object — on out itself, sealed
// (after the carried entries of the call), and appends to ops the operation that writes it: so
// out's one encoding is the hooked object with its undo. It reports false, changing nothing,
// where the entries need the hooked document (an operation on metadata or its annotations as
// a whole, or one undo.EntriesOf cannot read on raw alone): runChain then records it on the
// patch (withUndo).
func (r *call) sealOnto(c *chain, raw []byte, out client.Object, ops *[]patch.Operation) (bool, error) {
	meta, _ := r.metadataOf(raw) // identity as the request has it (the guard keeps it)
	value, ok, err := r.sealWith(c, raw, identityIn(c.key.GVK, sideOf(c.key.Type), meta), ops)
	if err != nil || !ok || value == "" {
		return ok, err
	}
	ann := maps.Clone(out.GetAnnotations()) // never the hook's own map
	if ann == nil {
		ann = map[string]string{}
	}
	ann[UndoAnnotation] = value
	out.SetAnnotations(ann)
	return true, nil
}

// sealWith seals the undo of ops for the object with identity id, appends the operation that
// writes it to ops and returns the value ("" when ops need no undo); false, changing nothing,
// where the entries need the hooked document (sealOnto).
func (r *call) sealWith(c *chain, raw []byte, id undo.Identity, ops *[]patch.Operation) (string, bool, error) {
	for _, op := range *ops {
		if op.Path == "/metadata" || op.Path == "/metadata/annotations" {
			return "", false, nil
		}
	}
	entries, ok := undo.EntriesOf(*ops, r.indexOf(raw))
	if !ok {
		return "", false, nil
	}
	if len(entries) == 0 {
		return "", true, nil
	}
	meta, hasMeta := r.metadataOf(raw)
	annotations := []byte(nil)
	if hasMeta {
		if m, _, ok := jsonscan.Find(meta, "annotations"); ok {
			annotations = m.Value
		}
	}
	if len(annotations) == 0 || string(annotations) == "null" {
		entries = append([]UndoEntry{undo.EmptyMapEntry("/metadata/annotations")}, entries...)
	}
	value, err := r.reg.sealUndoFor(c, id, entries, r.carry)
	if err != nil {
		return "", false, &HookError{Hook: c.names(), Type: c.key.Type, GVK: c.key.GVK, Err: err}
	}
	*ops = append(*ops, undoOperation(meta, hasMeta, annotations, value))
	return value, true, nil
}

// spliceAnnotation returns the JSON object doc (an encoding of a typed object, whose metadata
// is an object) with the annotation key set to value as its annotations' first member (or a new
// annotations map), nil when doc's metadata cannot be found as an object or already has the key.
func spliceAnnotation(doc []byte, key, value string) []byte {
	var meta []byte
	metaAt := -1
	jsonscan.ScanObject(doc, func(k, rest []byte) int {
		n := jsonscan.SkipValue(rest, 0)
		if string(k) == `"metadata"` && n > 0 {
			meta, metaAt = rest[:n], len(doc)-len(rest)
			return -1 // found: stop
		}
		return n
	})
	if metaAt < 0 || len(meta) == 0 || meta[0] != '{' {
		return nil
	}
	member := jsonscan.AppendString(nil, key)
	member = append(member, ':')
	member = jsonscan.AppendString(member, value)
	at, insert := metaAt+1, []byte(nil) // where, and what, to insert
	if m, _, ok := jsonscan.Find(meta, "annotations"); ok && len(m.Value) > 0 && m.Value[0] == '{' {
		if _, _, has := jsonscan.Find(m.Value, key); has {
			return nil
		}
		at = metaAt + m.End - len(m.Value) + 1 // just past the map's opening brace
		insert = member
		if len(bytes.TrimSpace(m.Value[1:len(m.Value)-1])) > 0 {
			insert = append(insert, ',')
		}
	} else if ok {
		return nil // annotations null or not a map: the whole compare handles it
	} else {
		insert = append([]byte(`"annotations":{`), member...)
		insert = append(insert, '}')
		if len(bytes.TrimSpace(meta[1:len(meta)-1])) > 0 {
			insert = append(insert, ',')
		}
	}
	out := make([]byte, 0, len(doc)+len(insert))
	out = append(out, doc[:at]...)
	out = append(out, insert...)
	return append(out, doc[at:]...)
}

// undoOperation returns the operation that writes the UndoAnnotation value on an object whose
// metadata (hasMeta: present) holds annotations (nil: none): an add to the map where there is
// one, else an add of the map, else of metadata.
func undoOperation(meta []byte, hasMeta bool, annotations []byte, value string) patch.Operation {
	switch {
	case len(annotations) > 0 && annotations[0] == '{':
		return patch.Operation{Operation: "add", Path: "/metadata/annotations/synchook.io~1undo", Value: value}
	case hasMeta && len(meta) > 0 && meta[0] == '{':
		return patch.Operation{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{UndoAnnotation: value}}
	}
	return patch.Operation{Operation: "add", Path: "/metadata", Value: map[string]any{"annotations": map[string]string{UndoAnnotation: value}}}
}

// OpenedUndo returns the entries of the sealed undo that the object raw (JSON) of kind gvk
// carries, opened as a read on the side of hook type t opens it (the object's identity, the
// registry's keys); false when it carries none. Errors: the value does not open (clear text,
// another object's seal, an unknown key) or raw is not an object. For tools that show or
// compare an undo by what it holds, never by its bytes (`synchook test`).
func (r *Registry) OpenedUndo(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) ([]UndoEntry, bool, error) {
	m, _, ok := jsonscan.Find(raw, "metadata")
	if !ok {
		return nil, false, nil
	}
	value, had := undoAnnotationIn(m.Value)
	if !had {
		return nil, false, nil
	}
	if r.ring() == nil {
		return nil, true, errors.New("no undo key")
	}
	side := sideOf(t)
	rec, _, err := r.ring().Open(identityIn(gvk, side, m.Value), side, value)
	if err != nil {
		return nil, true, err
	}
	return rec.Entries, true, nil
}
