package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// metadataDoc is what the label/annotation path reads of a request's metadata.
type metadataDoc struct {
	// metaObject says metadata is an object (not absent or null).
	metaObject bool
	namespace  string
	// name is metadata.name when it is a string, "" otherwise; generateName and uid are the
	// JSON literals of metadata's, decoded only when a seal needs them (identity).
	name              string
	generateName, uid []byte
	maps              [2]mapField // labels, annotations
}

// mapField is metadata.labels or metadata.annotations: whether present, its decoded content,
// and whether a key repeats.
type mapField struct {
	name          string
	present, dups bool
	value         map[string]string
}

// metadataDoc returns where the labels and annotations of rec's object are, read from the
// record, and decodes them the way the typed decoder would: *DecodeError for a value it would
// refuse (the first in raw, as a decode meets them). The chain's kind is checked against
// apiVersion and kind when it is unstructured. rec must be valid JSON and must not repeat what
// it reads (intake.Facts.Repeats: the plan takes another path then).
func (c *chain) metadataDoc(rec *intake.Record) (*metadataDoc, error) {
	raw, f := rec.Raw, rec.Facts()
	if !f.Object {
		return nil, c.decodeErrorf("the object is not a JSON object")
	}
	doc := &metadataDoc{}
	doc.maps[0].name, doc.maps[1].name = "labels", "annotations"
	if c.unstructured {
		var av, k string
		if rec.APIVersion == nil || rec.Kind == nil || json.Unmarshal(rec.APIVersion, &av) != nil || json.Unmarshal(rec.Kind, &k) != nil {
			return nil, c.decodeErrorf("apiVersion and kind must be strings")
		}
		if want := c.key.GVK; want.GroupVersion().String() != av || want.Kind != k {
			return nil, c.decodeErrorf("object is %s %s, want %s", av, k, want)
		}
	}
	if rec.Metadata == nil || string(rec.Metadata) == "null" {
		return doc, nil
	}
	if rec.Metadata[0] != '{' {
		return nil, c.decodeErrorf("metadata is not an object")
	}
	doc.name, _ = intake.String(f.Name) // checkInput refused a repeated name; the last one counts, as in undo.IdentityIn
	doc.generateName, doc.uid = f.GenerateName, f.UID
	var first error // the first refused value in raw
	at := len(raw)
	refuse := func(v []byte, err error) {
		if o := offset(raw, v); o < at {
			first, at = err, o
		}
	}
	if v := f.Namespace; v != nil {
		var ok bool
		if doc.namespace, ok = intake.String(v); !ok && string(v) != "null" {
			refuse(v, c.decodeErrorf("metadata.namespace is not a string"))
		}
	}
	for i, v := range [2][]byte{f.Labels, f.Annotations} {
		if v == nil {
			continue
		}
		m := &doc.maps[i]
		m.present = true
		var err error
		if m.value, m.dups, err = intake.DecodeStringMap(v); err != nil {
			refuse(v, c.decodeErrorf("metadata.%s: %v", m.name, err))
		}
	}
	if first != nil {
		return nil, first
	}
	doc.metaObject = true
	return doc, nil
}

// decodeErrorf returns a *DecodeError for c's kind with the message format makes of a.
func (c *chain) decodeErrorf(format string, a ...any) error {
	return &failure.DecodeError{GVK: c.key.GVK, Err: fmt.Errorf(format, a...)}
}

// offset returns where sub starts in doc; sub must be a sub-slice of doc.
func offset(doc, sub []byte) int {
	if len(sub) == 0 {
		return len(doc)
	}
	return cap(doc) - cap(sub)
}

// runMetadata is runOps for a chain of MetadataHooks: no typed decode. It returns the patch's
// operations on raw.
func (c *chain) runMetadata(ctx context.Context, rn *call, rec *intake.Record, undo bool) ([]patch.Operation, error) {
	doc, err := c.metadataDoc(rec)
	if err != nil {
		return nil, err
	}
	m, err := c.metadataHooked(ctx, rn, doc.namespace, [2]map[string]string{doc.maps[0].value, doc.maps[1].value})
	if err != nil {
		return nil, err
	}
	if undo {
		if err := rn.reg.recordMetadataUndo(c, doc, m, rn.carry); err != nil {
			return nil, &failure.HookError{Hook: c.names(), Type: c.key.Type, GVK: c.key.GVK, Err: err}
		}
	}
	return doc.answer([2]map[string]string{m.Labels, m.Annotations})
}

// metadataHooked runs the MetadataFuncs of c's hooks, in one concurrency slot of rn, on copies
// of the labels and annotations before (reserved annotations dropped first on a write chain)
// and returns what they made.
func (c *chain) metadataHooked(ctx context.Context, rn *call, namespace string, before [2]map[string]string) (*hooks.Metadata, error) {
	m := &hooks.Metadata{Namespace: namespace, Labels: maps.Clone(before[0]), Annotations: maps.Clone(before[1])}
	if _, write := c.key.Type.ReadOf(); write {
		undo.DropReserved(m.Annotations) // synchook's own: never what the request brings (undo.go)
	}
	err := c.supervise(ctx, rn, func(running *atomic.Int32) error {
		for i, h := range c.hooks {
			running.Store(int32(i))
			err := ctx.Err() // between hooks: a builtin chain runs inline
			if err == nil {
				err = rn.callOne(ctx, c, i, func(ctx context.Context) error { return h.meta(ctx, m) })
			}
			if err != nil {
				return &failure.HookError{Hook: h.name, Type: c.key.Type, GVK: c.key.GVK, Err: err}
			}
		}
		return nil
	})
	return m, err // on an error m is not to be read (an abandoned run may still write it)
}

// answer returns the operations of the patch that gives doc's object the labels and
// annotations after (nil: none); Result.Answer makes the merge answer from them.
func (doc *metadataDoc) answer(after [2]map[string]string) ([]patch.Operation, error) {
	ops := make([]patch.Operation, 0, 4)
	var metaMembers []string // members to add to metadata (absent before)
	for i := range doc.maps {
		f, now := &doc.maps[i], after[i]
		path := [2]string{"/metadata/labels", "/metadata/annotations"}[i]
		switch {
		case len(f.value) == 0 && len(now) == 0:
		case f.present && f.value != nil && now == nil: // an undo removes a map the write created
			ops = append(ops, patch.Operation{Operation: "remove", Path: path})
		case f.present && f.value != nil:
			removed, set := changedKeys(f.value, now)
			for _, k := range removed {
				ops = append(ops, patch.Operation{Operation: "remove", Path: path + "/" + escapeToken(k)})
			}
			for _, k := range set {
				op := "add"
				if _, had := f.value[k]; had {
					op = "replace"
				}
				ops = append(ops, patch.Operation{Operation: op, Path: path + "/" + escapeToken(k), Value: now[k]})
			}
		default: // absent or null, and now has keys: the whole map
			encoded, err := json.Marshal(now)
			if err != nil {
				return nil, err
			}
			if doc.metaObject {
				ops = append(ops, patch.Operation{Operation: "add", Path: path, Value: json.RawMessage(encoded)})
			} else {
				metaMembers = append(metaMembers, fmt.Sprintf("%q:%s", f.name, encoded))
			}
		}
	}
	if len(metaMembers) > 0 { // metadata absent or null: add it whole
		ops = append(ops, patch.Operation{Operation: "add", Path: "/metadata", Value: json.RawMessage("{" + strings.Join(metaMembers, ",") + "}")})
	}
	return ops, nil
}

// changedKeys returns, sorted, the keys of before that now lacks and the keys of now that
// before lacks or holds with another value.
func changedKeys(before, now map[string]string) (removed, set []string) {
	for k := range before {
		if _, ok := now[k]; !ok {
			removed = append(removed, k)
		}
	}
	for k, v := range now {
		if old, ok := before[k]; !ok || old != v {
			set = append(set, k)
		}
	}
	slices.Sort(removed)
	slices.Sort(set)
	return removed, set
}

// escapeToken escapes a JSON Pointer reference token (RFC 6901: ~ → ~0, / → ~1).
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// recordMetadataUndo sets undo.Annotation in m to the undo of the change from doc's labels
// and annotations to m's (nothing when they are equal: undo.RecordMaps), recorded by the write
// chain c after the carried entries carry, sealed for doc's object (Registry.seal).
func (r *Registry) recordMetadataUndo(c *chain, doc *metadataDoc, m *hooks.Metadata, carry []undo.Entry) error {
	value, err := undo.RecordMaps([2]map[string]string{doc.maps[0].value, doc.maps[1].value}, [2]map[string]string{m.Labels, m.Annotations},
		func(entries []undo.Entry) (string, error) { return r.seal(c, doc.identity(c.key), entries, carry) })
	if value != "" {
		m.Annotations = undo.SetIn(m.Annotations, value)
	}
	return err
}

// identity returns the identity a seal on doc's object for key is bound to (undo.Meta), from
// doc, for sealing only (no creation time, which only opening reads).
func (doc *metadataDoc) identity(key Key) undo.Identity {
	generateName, _ := intake.String(doc.generateName)
	uid, _ := intake.String(doc.uid)
	m := undo.Meta{Namespace: doc.namespace, Name: doc.name, GenerateName: generateName, UID: uid, ObjectUID: doc.maps[1].value[undo.ObjectUIDAnnotation]}
	return m.Identity(key.GVK, key.Type.Side())
}
