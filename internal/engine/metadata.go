package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// metadataDoc is where the labels and annotations of a request are, as offsets into raw:
// metaStart/metaEnd delimit metadata's value (metaStart < 0: absent or null; then metaEnd is the
// offset of that null, or -1). generateName and uid are JSON literals, decoded only to seal.
type metadataDoc struct {
	raw                []byte
	metaStart, metaEnd int
	namespace, name    string
	generateName, uid  []byte
	maps               [2]mapField // labels, annotations
}

// mapField is metadata.labels or metadata.annotations: raw[start:end] is its value, text
// (start < 0: absent), value its decoded content; dups says a key repeats (or that the
// members' text is not to be spliced).
type mapField struct {
	name       string
	start, end int
	value      map[string]string
	text       []byte
	dups       bool
}

// metadataDoc returns where the labels and annotations of rec's object are, read from the
// record, and decodes them the way the typed decoder would: *DecodeError for a value it would
// refuse (the first in raw, as a decode meets them). The chain's kind is checked against
// apiVersion and kind when it is unstructured. rec must be valid JSON and must not repeat what
// it reads (metaFacts.repeats: the plan takes another path then).
func (c *chain) metadataDoc(rec *record) (*metadataDoc, error) {
	raw, f := rec.raw, rec.metaFacts()
	if !f.object {
		return nil, c.decodeErrorf("the object is not a JSON object")
	}
	doc := &metadataDoc{raw: raw, metaStart: -1, metaEnd: -1}
	doc.maps[0].name, doc.maps[1].name = "labels", "annotations"
	doc.maps[0].start, doc.maps[1].start = -1, -1
	if c.unstructured {
		var av, k string
		if rec.apiVersion == nil || rec.kind == nil || json.Unmarshal(rec.apiVersion, &av) != nil || json.Unmarshal(rec.kind, &k) != nil {
			return nil, c.decodeErrorf("apiVersion and kind must be strings")
		}
		if want := c.key.GVK; want.GroupVersion().String() != av || want.Kind != k {
			return nil, c.decodeErrorf("object is %s %s, want %s", av, k, want)
		}
	}
	if rec.metadata == nil {
		return doc, nil
	}
	base := offset(raw, rec.metadata)
	if string(rec.metadata) == "null" {
		doc.metaEnd = base
		return doc, nil
	}
	if rec.metadata[0] != '{' {
		return nil, c.decodeErrorf("metadata is not an object")
	}
	doc.name, _ = stringOf(f.name) // checkInput refused a repeated name; the last one counts, as in undo.IdentityIn
	doc.generateName, doc.uid = f.generateName, f.uid
	var first error // the first refused value in raw
	at := len(raw)
	refuse := func(v []byte, err error) {
		if o := offset(raw, v); o < at {
			first, at = err, o
		}
	}
	if v := f.namespace; v != nil {
		var ok bool
		if doc.namespace, ok = stringOf(v); !ok && string(v) != "null" {
			refuse(v, c.decodeErrorf("metadata.namespace is not a string"))
		}
	}
	for i, v := range [2][]byte{f.labels, f.annotations} {
		if v == nil {
			continue
		}
		m := &doc.maps[i]
		m.start, m.end, m.text = offset(raw, v), offset(raw, v)+len(v), v
		var err error
		if m.value, m.dups, err = decodeStringMap(v); err != nil {
			refuse(v, c.decodeErrorf("metadata.%s: %v", m.name, err))
		}
	}
	if first != nil {
		return nil, first
	}
	doc.metaStart, doc.metaEnd = base, base+len(rec.metadata)
	return doc, nil
}

// decodeErrorf returns a *DecodeError for c's kind with the message format makes of a.
func (c *chain) decodeErrorf(format string, a ...any) error {
	return &DecodeError{GVK: c.key.GVK, Err: fmt.Errorf(format, a...)}
}

// offset returns where sub starts in doc; sub must be a sub-slice of doc.
func offset(doc, sub []byte) int {
	if len(sub) == 0 {
		return len(doc)
	}
	return cap(doc) - cap(sub)
}

// runMetadata is runOps for a chain of MetadataHooks: no typed decode. It returns the patch's
// operations on raw and the merge answer (Result.Answer).
func (c *chain) runMetadata(ctx context.Context, rn *call, rec *record, undo bool) ([]patch.Operation, []byte, error) {
	doc, err := c.metadataDoc(rec)
	if err != nil {
		return nil, nil, err
	}
	m, err := c.metadataHooked(ctx, rn, doc.namespace, [2]map[string]string{doc.maps[0].value, doc.maps[1].value})
	if err != nil {
		return nil, nil, err
	}
	if undo {
		if err := rn.reg.recordMetadataUndo(c, doc, m, rn.carry); err != nil {
			return nil, nil, &HookError{Hook: c.names(), Type: c.key.Type, GVK: c.key.GVK, Err: err}
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
				return &HookError{Hook: h.name, Type: c.key.Type, GVK: c.key.GVK, Err: err}
			}
		}
		return nil
	})
	return m, err // on an error m is not to be read (an abandoned run may still write it)
}

// answer returns the operations of the patch that gives doc's object the labels and
// annotations after (nil: none), and the merge answer (see Result.Answer).
func (doc *metadataDoc) answer(after [2]map[string]string) ([]patch.Operation, []byte, error) {
	var a metadataAnswer
	// Members to add to metadata (absent before); a local slice, which can stay on the stack.
	var metaMembers []string
	for i := range doc.maps {
		f := &doc.maps[i]
		now := after[i]
		if len(f.value) == 0 && len(now) == 0 {
			continue
		}
		path := "/metadata/" + f.name
		if f.start >= 0 && f.value != nil && now == nil {
			// The map goes (an undo removes a map the write created): removed, not left
			// empty, and null in the merge answer (a merging decoder then drops it).
			a.ops = append(a.ops, patch.Operation{Operation: "remove", Path: path})
			a.edits = append(a.edits, edit{f.start, f.end, []byte("null")})
			continue
		}
		if f.start >= 0 && f.value != nil {
			if err := a.changeMap(f, path, now); err != nil {
				return nil, nil, err
			}
			continue
		}
		// Absent or null (so now has keys): add the whole map.
		member, err := a.addMap(doc, f, path, now)
		if err != nil {
			return nil, nil, err
		}
		if member != "" {
			metaMembers = append(metaMembers, member)
		}
	}
	if len(a.ops) == 0 && len(metaMembers) == 0 {
		return nil, nil, nil
	}
	a.addMetadataMembers(doc, metaMembers)
	return a.ops, applyEdits(doc.raw, a.edits), nil
}

// metadataAnswer is the patch's operations and the edits that make the merge answer.
type metadataAnswer struct {
	ops   []patch.Operation
	edits []edit
}

// addMap adds to a the map f (at path; absent or null before) with now's keys: an add
// operation when metadata is an object, and the whole map in place of f's null; for an absent
// f it returns the member to add to metadata instead ("" otherwise).
func (a *metadataAnswer) addMap(doc *metadataDoc, f *mapField, path string, now map[string]string) (string, error) {
	encoded, err := json.Marshal(now)
	if err != nil {
		return "", err
	}
	if doc.metaStart >= 0 {
		a.ops = append(a.ops, patch.Operation{Operation: "add", Path: path, Value: json.RawMessage(encoded)})
	}
	if f.start < 0 {
		return fmt.Sprintf("%q:%s", f.name, encoded), nil
	}
	a.edits = append(a.edits, edit{f.start, f.end, encoded})
	return "", nil
}

// changeMap adds to a what turns the map f (present, not null) into now: an operation per
// changed key, and the changes spliced in when no key goes and none repeats, else the map reset
// and given whole.
func (a *metadataAnswer) changeMap(f *mapField, path string, now map[string]string) error {
	removed, set := changedKeys(f.value, now)
	if len(removed) == 0 && len(set) == 0 {
		return nil // the same keys and values
	}
	for _, k := range removed {
		a.ops = append(a.ops, patch.Operation{Operation: "remove", Path: path + "/" + escapeToken(k)})
	}
	for _, k := range set {
		op := "add"
		if _, had := f.value[k]; had {
			op = "replace"
		}
		a.ops = append(a.ops, patch.Operation{Operation: op, Path: path + "/" + escapeToken(k), Value: now[k]})
	}
	if len(removed) == 0 && !f.dups {
		a.edits = append(a.edits, f.spliced(now, set)...)
		return nil
	}
	// A merging decoder keeps map keys the answer lacks: reset the map first.
	encoded := []byte("null")
	if len(now) > 0 {
		all, err := json.Marshal(now)
		if err != nil {
			return err
		}
		encoded = append([]byte(`null,"`+f.name+`":`), all...)
	}
	a.edits = append(a.edits, edit{f.start, f.end, encoded})
	return nil
}

// addMetadataMembers adds metaMembers to metadata when it is an object, else as the whole
// metadata (in the merge answer: in place of its null, or as the object's first member).
func (a *metadataAnswer) addMetadataMembers(doc *metadataDoc, metaMembers []string) {
	raw := doc.raw
	switch {
	case doc.metaStart >= 0 && len(metaMembers) > 0:
		text := strings.Join(metaMembers, ",")
		at := doc.metaStart + 1 // just past metadata's '{'
		if len(bytes.TrimSpace(raw[at:doc.metaEnd-1])) > 0 {
			text += ","
		}
		a.edits = append(a.edits, edit{at, at, []byte(text)})
	case doc.metaStart < 0: // metadata absent or null: add it whole
		value := "{" + strings.Join(metaMembers, ",") + "}"
		a.ops = append(a.ops, patch.Operation{Operation: "add", Path: "/metadata", Value: json.RawMessage(value)})
		if doc.metaEnd >= 0 {
			a.edits = append(a.edits, edit{doc.metaEnd, doc.metaEnd + len("null"), []byte(value)})
		} else {
			at := bytes.IndexByte(raw, '{') + 1
			text := `"metadata":` + value
			if len(bytes.TrimSpace(raw[at:bytes.LastIndexByte(raw, '}')])) > 0 {
				text += ","
			}
			a.edits = append(a.edits, edit{at, at, []byte(text)})
		}
	}
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

// spliced returns the edits that turn the map f (no repeated key) into now, which only adds or
// changes the keys set: changed values replaced where they stand, new members inserted first.
func (f *mapField) spliced(now map[string]string, set []string) []edit {
	value := f.start // offsets of members are relative to the map's value
	var edits []edit
	var added []byte
	var replaced []string // keys f had, whose values change where they stand
	for _, k := range set {
		if _, had := f.value[k]; had {
			replaced = append(replaced, k)
			continue
		}
		if len(added) > 0 {
			added = append(added, ',')
		}
		added = append(added, jsonString(k)...)
		added = append(added, ':')
		added = append(added, jsonString(now[k])...)
	}
	if len(added) > 0 {
		if len(f.value) > 0 { // no repeated key: as many members as keys
			added = append(added, ',')
		}
		edits = append(edits, edit{value + 1, value + 1, added}) // just past the map's '{'
	}
	if len(replaced) > 0 { // one pass over the map's members for all of them
		eachEntry(f.text, func(key, valueLit []byte) {
			for _, k := range replaced {
				if string(key) == k {
					at := value + offset(f.text, valueLit)
					edits = append(edits, edit{at, at + len(valueLit), jsonString(now[k])})
				}
			}
		})
	}
	return edits
}

// edit replaces raw[start:end] with text.
type edit struct {
	start, end int
	text       []byte
}

// applyEdits returns raw with the non-overlapping edits made, in a new slice.
func applyEdits(raw []byte, edits []edit) []byte {
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	size := len(raw)
	for _, e := range edits {
		size += len(e.text) - (e.end - e.start)
	}
	out := make([]byte, 0, size) // exactly: a sealed undo alone is longer than any fixed slack
	at := 0
	for _, e := range edits {
		out = append(out, raw[at:e.start]...)
		out = append(out, e.text...)
		at = e.end
	}
	return append(out, raw[at:]...)
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
	generateName, _ := stringOf(doc.generateName)
	uid, _ := stringOf(doc.uid)
	m := undo.Meta{Namespace: doc.namespace, Name: doc.name, GenerateName: generateName, UID: uid, ObjectUID: doc.maps[1].value[undo.ObjectUIDAnnotation]}
	return m.Identity(key.GVK, key.Type.Side())
}
