package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// UndoAnnotation is the annotation in which a write chain records how to restore the object
// the syncer sent (RegistryOptions.Undo). Its value is a JSON array of UndoEntry.
const UndoAnnotation = "synchook.io/undo"

// DefaultMaxUndoBytes bounds the value of UndoAnnotation (RegistryOptions.MaxUndoBytes): 16 KiB,
// well within the 256 KiB Kubernetes allows for all annotations of an object.
const DefaultMaxUndoBytes = 16 << 10

// ErrUndoTooLarge is the cause of a HookError when the undo of a chain's change would not fit
// in DefaultMaxUndoBytes (RegistryOptions.MaxUndoBytes): the chain's change is refused (422),
// since it could not be taken back on the way up.
var ErrUndoTooLarge = errors.New("the change is too large to record its undo")

// UndoEntry is one change of a write chain and how to take it back: at Path (an RFC 6901 JSON
// Pointer), the hooks wrote Hooked (absent: they removed the value) where the syncer had sent
// Original (absent: there was no value). Undo puts Original back (or removes the value) only
// when the object still holds Hooked there, so a later change by someone else is kept.
type UndoEntry struct {
	Path     string          `json:"path"`
	Hooked   json.RawMessage `json:"hooked,omitempty"`
	Original json.RawMessage `json:"original,omitempty"`
}

// undoPair maps each write hook type to the read hook type that undoes it.
var undoPair = map[HookType]HookType{
	CreatePhysical: GetPhysical, UpdatePhysical: GetPhysical,
	CreateVirtual: GetVirtual, UpdateVirtual: GetVirtual,
}

// Undoer is implemented by hooks that choose whether their change is taken back on the way up
// (RegistryOptions.Undo): Undo returning false means the tenant should see it, and then the
// chains the hook is in record no undo (a chain is undone whole or not at all).
type Undoer interface {
	Undo() bool
}

// undoEntries returns the entries that take the change from before to after back, for the
// forward operations ops (computed between the two documents, which must be valid JSON), the
// undo annotation's own path excluded.
func undoEntries(ops []patch.Operation, before, after []byte) []UndoEntry {
	entries := make([]UndoEntry, 0, len(ops))
	for _, op := range ops {
		if isUndoPath(op.Path) {
			continue
		}
		e := UndoEntry{Path: op.Path}
		if v, ok := lookupPointer(after, op.Path); ok {
			e.Hooked = json.RawMessage(v)
		}
		if v, ok := lookupPointer(before, op.Path); ok {
			e.Original = json.RawMessage(v)
		}
		entries = append(entries, e)
	}
	return entries
}

// emptyMapEntry is the first entry of an undo whose change created the map at path (labels or
// annotations) where the syncer sent none: undone last, it removes the map when nothing else is
// left in it.
func emptyMapEntry(path string) UndoEntry {
	return UndoEntry{Path: path, Hooked: json.RawMessage("{}")}
}

func isUndoPath(p string) bool {
	return p == "/metadata/annotations/synchook.io~1undo"
}

// encodeUndo returns the annotation value for entries, or ErrUndoTooLarge past max bytes.
func encodeUndo(entries []UndoEntry, max int) (string, error) {
	data, err := json.Marshal(entries)
	if err != nil {
		return "", err
	}
	if len(data) > max {
		return "", fmt.Errorf("%w: %d bytes, the limit is %d", ErrUndoTooLarge, len(data), max)
	}
	return string(data), nil
}

// applyUndo returns doc with the undo recorded in its UndoAnnotation applied and the
// annotation removed; ok is false when doc carries no undo. An entry whose path no longer holds
// what the hooks wrote is skipped. A malformed annotation is an error.
func applyUndo(doc []byte) (out []byte, ok bool, err error) {
	value, found := undoAnnotation(doc)
	if !found {
		return doc, false, nil
	}
	var entries []UndoEntry
	if err := json.Unmarshal([]byte(value), &entries); err != nil {
		return nil, true, fmt.Errorf("annotation %s: %w", UndoAnnotation, err)
	}
	// The annotation goes first: the entries were recorded before it was added.
	out, err = applyOps(doc, patch.Operation{Operation: "remove", Path: "/metadata/annotations/synchook.io~1undo"})
	if err != nil {
		return nil, true, err
	}
	for _, e := range slices.Backward(entries) {
		cur, has := lookupPointer(out, e.Path)
		if has != (e.Hooked != nil) || has && !jsonEqual(cur, e.Hooked) {
			continue // changed since the hooks wrote it: keep what is there now
		}
		var op patch.Operation
		switch {
		case e.Original == nil && has:
			op = patch.Operation{Operation: "remove", Path: e.Path}
		case e.Original != nil && has:
			op = patch.Operation{Operation: "replace", Path: e.Path, Value: e.Original}
		case e.Original != nil:
			op = patch.Operation{Operation: "add", Path: e.Path, Value: e.Original}
		default:
			continue
		}
		next, err := applyOps(out, op)
		if err != nil {
			continue // the parent is gone: nothing to restore into
		}
		out = next
	}
	return out, true, nil
}

func applyOps(doc []byte, ops ...patch.Operation) ([]byte, error) {
	p, err := patch.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return patch.Apply(doc, p)
}

// undoAnnotation returns the value of UndoAnnotation in the JSON object doc.
func undoAnnotation(doc []byte) (string, bool) {
	meta, _, ok := jsonscan.Find(doc, "metadata")
	if !ok {
		return "", false
	}
	ann, _, ok := jsonscan.Find(meta.Value, "annotations")
	if !ok {
		return "", false
	}
	m, _, ok := jsonscan.Find(ann.Value, UndoAnnotation)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(m.Value, &s) != nil {
		return "", false
	}
	return s, true
}

// lookupPointer returns the value at the JSON Pointer path of doc.
func lookupPointer(doc []byte, path string) ([]byte, bool) {
	tokens, err := patch.ParsePointer(path)
	if err != nil {
		return nil, false
	}
	return jsonscan.Lookup(doc, tokens)
}

// jsonEqual compares two JSON values by meaning (key order and white space aside).
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
