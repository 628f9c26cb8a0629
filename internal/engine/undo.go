package engine

// Automatic undo, and why a tenant cannot steer it.
//
// A write chain (CreatePhysical, UpdatePhysical, CreateVirtual, UpdateVirtual) records in
// UndoAnnotation how to go back from the hooked object to the object the syncer sent; the
// paired read type (GetPhysical, GetVirtual) applies it, so the syncer never sees the hooks'
// change come back and never fights it.
//
// The annotation travels on the object, and everything on an object may have been written by
// the tenant (the tenant model in the README): a tenant who sets synchook.io/undo on a virtual
// object gets it copied to the host by the syncer. So the read side trusts no annotation it
// cannot verify. The design is verification, not a MAC: an undo is accepted only when running
// the kind's own write chain on the restored view gives back the stored object exactly,
//
//	write(undo(x)) == x
//
// which is precisely "the view differs from the stored object only by what synchook's own
// write chain did". It needs no key (nothing to provision, rotate or share between replicas
// and restarts), and it makes identity changes impossible on top of the explicit checks: no
// write chain may change apiVersion, kind, name, namespace or uid, so an undo that did could
// never verify. A MAC (the other design that works) would prove only that synchook wrote the
// annotation, not that it still fits the object, and needs a key shared by every replica.
//
// The price is one run of the write chain per read that carries an annotation (the hooks must
// be deterministic functions of the object, which the idempotency check at start already
// asks of them), and an undo that no longer fits — a hook that changed, an object someone else
// changed at a hooked path — is dropped rather than applied in part: the reader then sees the
// stored object, as it would without synchook's undo.
//
// Work is bounded whatever the annotation holds: its value is at most MaxUndoBytes (which
// bounds the entries to about one per 12 bytes), the entries are applied to one decoded copy of
// the object (one decode, one encode, whatever their number), under the request's context and
// a concurrency slot. An annotation that is too large, malformed, touches identity or does not
// verify is dropped and counted (UndoObserver; synchook_undo_rejected_total{reason}); the read
// never fails because of it.
//
// On the write side the reserved annotations (UndoAnnotation, ProvenanceAnnotation) are
// synchook's alone: a write chain takes them off the object before its hooks run, so what a
// tenant wrote there never reaches the host as written; the removal is part of the recorded
// undo, so the reader gets the tenant's value back and sees no difference to "fix".

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
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

// The reasons for which a read drops an UndoAnnotation (UndoObserver).
const (
	// UndoTooLarge: the value is longer than MaxUndoBytes, which synchook never writes.
	UndoTooLarge = "too_large"
	// UndoMalformed: the value is not a JSON array of entries with valid JSON Pointers.
	UndoMalformed = "malformed"
	// UndoIdentity: an entry would touch apiVersion, kind, name, namespace or uid.
	UndoIdentity = "identity"
	// UndoUnverified: the kind's write chain, run on the restored view, does not give back the
	// stored object (a forged or stale annotation, or a hook that is not deterministic).
	UndoUnverified = "unverified"
	// UndoDeadline: the request ended before the undo was verified.
	UndoDeadline = "deadline"
)

// UndoObserver is told when a read chain drops an UndoAnnotation, with one of the reasons
// above (a Runner's Observer that also implements it: metrics.Recorder counts them).
type UndoObserver interface {
	ObserveUndoRejected(t hooks.HookType, gvk schema.GroupVersionKind, reason string)
}

// UndoEntry is one change of a write chain and how to take it back: at Path (an RFC 6901 JSON
// Pointer), the hooks wrote Hooked (absent: they removed the value) where the syncer had sent
// Original (absent: there was no value).
type UndoEntry struct {
	Path     string          `json:"path"`
	Hooked   json.RawMessage `json:"hooked,omitempty"`
	Original json.RawMessage `json:"original,omitempty"`
}

// undoPair maps each write hook type to the read hook type that undoes it.
var undoPair = map[hooks.HookType]hooks.HookType{
	hooks.CreatePhysical: hooks.GetPhysical, hooks.UpdatePhysical: hooks.GetPhysical,
	hooks.CreateVirtual: hooks.GetVirtual, hooks.UpdateVirtual: hooks.GetVirtual,
}

// undoWriters lists, for each read hook type with an undo, the write types that record it, in
// the order a read tries them when it verifies an undo.
var undoWriters = map[hooks.HookType][]hooks.HookType{
	hooks.GetPhysical: {hooks.UpdatePhysical, hooks.CreatePhysical},
	hooks.GetVirtual:  {hooks.UpdateVirtual, hooks.CreateVirtual},
}

// ProvenanceAnnotation and UndoAnnotation are reserved: a write chain removes what the object
// brings of them before its hooks run.
var reservedAnnotations = [...]string{UndoAnnotation, ProvenanceAnnotation}

// dropReserved deletes the reserved annotations from ann and reports whether there were any.
func dropReserved(ann map[string]string) bool {
	found := false
	for _, k := range reservedAnnotations {
		if _, ok := ann[k]; ok {
			delete(ann, k)
			found = true
		}
	}
	return found
}

// undoEntries returns the entries that take the change from before to after back, for the
// forward operations ops (computed between the two documents, which must be valid JSON).
func undoEntries(ops []patch.Operation, before, after []byte) []UndoEntry {
	entries := make([]UndoEntry, 0, len(ops))
	for _, op := range ops {
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

// isReservedPath reports whether p is the JSON Pointer of a reserved annotation.
func isReservedPath(p string) bool {
	return isUndoPath(p) || p == "/metadata/annotations/synchook.io~1mutated-by"
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

// undoView returns the view of the stored object raw that the read chain c hands on: raw with
// the undo recorded in value (raw's UndoAnnotation) applied and the annotation removed, when
// that undo is within limits, leaves identity alone and verifies (see the comment at the top
// of this file). steps are the annotation's entries (parseUndo). Otherwise view is nil and
// reason says why the annotation was dropped. err is a
// *DecodeError when raw is not valid JSON. rn runs the verifying write chain.
func (rn *call) undoView(ctx context.Context, c *chain, raw []byte, steps []undoStep) (view []byte, reason string, err error) {
	stored, err := decodeTree(raw)
	if err != nil {
		return nil, "", &DecodeError{GVK: c.key.GVK, Err: err}
	}
	tree := copyTree(stored) // the copy the entries change; stored stays as it is
	if reason := applyUndoSteps(ctx, tree, steps); reason != "" {
		return nil, reason, nil
	}
	if identityOfTree(tree) != identityOfTree(stored) { // cannot happen after the checks above
		return nil, UndoIdentity, nil
	}
	if view, err = json.Marshal(tree); err != nil {
		return nil, UndoMalformed, nil
	}
	canonicalUndo(stored)
	if reason := rn.verifyUndo(ctx, c.key, view, stored); reason != "" {
		return nil, reason, nil
	}
	return view, "", nil
}

// parseUndo returns the entries of the UndoAnnotation value with their paths parsed, or the
// reason the annotation must be dropped without looking at the object: too large, malformed,
// or an entry that addresses identity.
func (r *Registry) parseUndo(value string) ([]undoStep, string) {
	if len(value) > r.opts.MaxUndoBytes {
		return nil, UndoTooLarge
	}
	var entries []UndoEntry
	if json.Unmarshal([]byte(value), &entries) != nil {
		return nil, UndoMalformed
	}
	steps := make([]undoStep, len(entries))
	for i, e := range entries {
		tokens, err := patch.ParsePointer(e.Path)
		if err != nil || len(tokens) == 0 {
			return nil, UndoMalformed
		}
		if patch.ProtectedField(e.Path) != "" {
			return nil, UndoIdentity
		}
		steps[i] = undoStep{entry: e, tokens: tokens}
	}
	return steps, ""
}

// verifyUndo returns "" when one of the write chains that record the undo of read type
// key.Type, run on view, gives back stored exactly; else why not.
func (rn *call) verifyUndo(ctx context.Context, key Key, view []byte, stored any) string {
	var tried []string
	for _, t := range undoWriters[key.Type] {
		wc := rn.reg.chains[Key{GVK: key.GVK, Type: t}]
		if wc == nil || !rn.reg.recordsUndo(wc) || slices.Contains(tried, wc.names()) {
			continue // chains with the same hooks give the same answer
		}
		tried = append(tried, wc.names())
		if ctx.Err() != nil {
			return UndoDeadline
		}
		rewritten, _, err := rn.applyChain(ctx, wc, view)
		if err != nil {
			if ctx.Err() != nil {
				return UndoDeadline
			}
			continue
		}
		if w, err := decodeTree(rewritten); err == nil && canonicalUndo(w) && reflect.DeepEqual(w, stored) {
			return ""
		}
	}
	return UndoUnverified
}

// canonicalUndo replaces the UndoAnnotation of a decoded object with canonicalEntries of it,
// so that two undos that differ only in the order of their entries compare equal: the order
// follows the member order of the document the write chain diffed, which a view need not keep.
// It reports false when the annotation is there but malformed.
func canonicalUndo(tree any) bool {
	ann, _ := lookupTree(tree, []string{"metadata", "annotations"})
	m, isMap := ann.(map[string]any)
	if !isMap {
		return true
	}
	value, ok := m[UndoAnnotation].(string)
	if !ok {
		return true
	}
	canon := canonicalEntries(value)
	m[UndoAnnotation] = canon
	return canon != ""
}

// undoStep is an UndoEntry with its path parsed.
type undoStep struct {
	entry  UndoEntry
	tokens []string
}

// applyUndoSteps removes UndoAnnotation from the decoded object tree and applies the steps to
// it in reverse order (the annotation first: the entries were recorded before it was added).
// A step whose path no longer holds what the hooks wrote is skipped; one whose parent is gone
// has nothing to restore into and is skipped too. It returns a reason when the steps cannot
// be applied at all.
func applyUndoSteps(ctx context.Context, tree any, steps []undoStep) string {
	if !removeAt(tree, []string{"metadata", "annotations", UndoAnnotation}) {
		return UndoMalformed
	}
	for i, s := range slices.Backward(steps) {
		if i%64 == 0 && ctx.Err() != nil {
			return UndoDeadline
		}
		var hooked, original any
		if s.entry.Hooked != nil && decodeValue(s.entry.Hooked, &hooked) != nil ||
			s.entry.Original != nil && decodeValue(s.entry.Original, &original) != nil {
			return UndoMalformed
		}
		cur, has := lookupTree(tree, s.tokens)
		if has && s.entry.Hooked == nil && isEmptyAnnotations(s.tokens, cur) {
			has = false // only the undo annotation was there: the hooks had removed the map
		}
		if has != (s.entry.Hooked != nil) || has && !reflect.DeepEqual(cur, hooked) {
			continue // changed since the hooks wrote it
		}
		if s.entry.Original == nil {
			removeAt(tree, s.tokens)
		} else {
			setAt(tree, s.tokens, original)
		}
	}
	return ""
}

func isEmptyAnnotations(tokens []string, v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0 && len(tokens) == 2 && tokens[0] == "metadata" && tokens[1] == "annotations"
}

// decodeTree decodes a JSON document into maps, slices and json.Number, for comparisons that
// keep every number as it was written.
func decodeTree(doc []byte) (any, error) {
	var v any
	return v, decodeValue(doc, &v)
}

func decodeValue(doc []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// copyTree returns a deep copy of a decoded JSON value (cheaper than decoding it again).
func copyTree(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = copyTree(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = copyTree(e)
		}
		return a
	}
	return v // string, json.Number, bool, nil: values
}

// lookupTree returns the value at the reference tokens of a JSON Pointer in tree.
func lookupTree(tree any, tokens []string) (any, bool) {
	cur := tree
	for _, tok := range tokens {
		switch node := cur.(type) {
		case map[string]any:
			v, ok := node[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, ok := arrayIndex(tok, len(node))
			if !ok || i == len(node) {
				return nil, false
			}
			cur = node[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// setAt sets the value at tokens (RFC 6902 add: a member is set, an array index inserts, "-"
// appends). It reports false when the parent does not exist.
func setAt(tree any, tokens []string, v any) bool {
	return editParent(tree, tokens, func(m map[string]any, key string) bool {
		m[key] = v
		return true
	}, func(a []any, i int) ([]any, bool) {
		return slices.Insert(slices.Clone(a), i, v), true
	})
}

// removeAt removes the value at tokens; false when there is none.
func removeAt(tree any, tokens []string) bool {
	return editParent(tree, tokens, func(m map[string]any, key string) bool {
		_, ok := m[key]
		delete(m, key)
		return ok
	}, func(a []any, i int) ([]any, bool) {
		return slices.Delete(slices.Clone(a), i, i+1), i < len(a)
	})
}

// editParent changes the parent of the value at tokens (not the root): inMap for an object, inArray
// for an array, which returns the new array (arrays are values inside their own parent, so it
// is stored back there) and whether the index suits it. It reports false when the parent does
// not exist or the edit does not apply.
func editParent(tree any, tokens []string, inMap func(map[string]any, string) bool, inArray func([]any, int) ([]any, bool)) bool {
	if len(tokens) == 0 {
		return false
	}
	parent, ok := lookupTree(tree, tokens[:len(tokens)-1])
	if !ok {
		return false
	}
	last := tokens[len(tokens)-1]
	switch node := parent.(type) {
	case map[string]any:
		return inMap(node, last)
	case []any:
		i, ok := arrayIndex(last, len(node))
		if !ok {
			return false
		}
		changed, ok := inArray(node, i)
		return ok && editParent(tree, tokens[:len(tokens)-1], func(m map[string]any, key string) bool {
			m[key] = changed
			return true
		}, func(a []any, j int) ([]any, bool) {
			if j == len(a) {
				return nil, false
			}
			a[j] = changed
			return a, true
		})
	}
	return false
}

// arrayIndex parses an array reference token for an array of n elements: 0..n ("-" is n).
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "-" {
		return n, true
	}
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || i > n {
		return 0, false
	}
	return i, true
}

// identityOfTree returns what no undo may change, from a decoded object.
func identityOfTree(tree any) [5]any {
	get := func(tokens ...string) any { v, _ := lookupTree(tree, tokens); return v }
	return [5]any{get("apiVersion"), get("kind"), get("metadata", "name"), get("metadata", "namespace"), get("metadata", "uid")}
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
