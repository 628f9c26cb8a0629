package engine

// Automatic undo, and why a tenant cannot steer it.
//
// A write chain (CreatePhysical, UpdatePhysical, CreateVirtual, UpdateVirtual) records in
// UndoAnnotation how to go back from the hooked object to the object the syncer sent; the
// paired read type (GetPhysical, GetVirtual) applies it, so the syncer never sees the hooks'
// change come back and never fights it. The entries, their format and the key ring are
// package undo's; this file applies them to an object.
//
// The annotation travels on the object, and everything on an object may have been written by
// the tenant (the tenant model in the README): a tenant who sets synchook.io/undo on a virtual
// object gets it copied to the host by the syncer. So the read side trusts no annotation it
// cannot prove is synchook's own:
//
//   - with a key (RegistryOptions.Keys), the value is sealed (AES-256-GCM, bound to the
//     object's identity and side, deterministic): a value that opens is synchook's, whatever
//     is configured now, and is applied without running any chain (sealed.go);
//   - without one, a clear-text undo is accepted only when running the kind's own write chain
//     on the restored view gives back the stored object exactly,
//
//	write(undo(x)) == x
//
// which is "the view differs from the stored object only by what synchook's own write chain
// did" — and only on a kind whose every write passes through that chain (sealed.go,
// clearTrusted). Its price is one run of the write chain per read and an undo that no longer
// verifies after any config change.
//
// Either way no undo can change identity: an entry that addresses apiVersion, kind, name,
// namespace or uid drops the whole annotation. An entry whose path no longer holds what the
// hooks wrote is skipped, never forced.
//
// Work is bounded whatever the annotation holds: its value is at most MaxUndoBytes as stored
// (which bounds the entries), the entries are applied to one decoded copy of the object (one
// decode, one encode, whatever their number), under the request's context and a concurrency
// slot. An annotation that is too large, malformed, unauthentic, untrusted, touches identity
// or does not verify is dropped and counted (UndoObserver; synchook_undo_rejected_total{reason});
// the read never fails because of it.
//
// On the write side the reserved annotations (UndoAnnotation, ProvenanceAnnotation) are
// synchook's alone: a write chain takes them off the object before its hooks run, so what a
// tenant wrote there never reaches the host as written; the removal is part of the recorded
// undo, so the reader gets the tenant's value back and sees no difference to "fix". An undo
// synchook wrote itself is applied first instead (sealed.go, ownUndo): never nested.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// UndoAnnotation is the annotation in which a write chain records how to restore the object
// the syncer sent (RegistryOptions.Undo): undo.Annotation.
const UndoAnnotation = undo.Annotation

// DefaultMaxUndoBytes bounds the value of UndoAnnotation as stored (RegistryOptions.MaxUndoBytes):
// undo.DefaultMaxBytes, 16 KiB.
const DefaultMaxUndoBytes = undo.DefaultMaxBytes

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
	// UndoDeadline: the request ended before the undo was applied or verified.
	UndoDeadline = "deadline"
)

// UndoObserver is told when a read chain drops an UndoAnnotation, with one of the reasons
// above (a Runner's Observer that also implements it: metrics.Recorder counts them).
type UndoObserver interface {
	ObserveUndoRejected(t hooks.HookType, gvk schema.GroupVersionKind, reason string)
}

// UndoEntry is one change of a write chain and how to take it back (undo.Entry).
type UndoEntry = undo.Entry

// undoPair maps each write hook type to the read hook type that undoes it.
var undoPair = map[hooks.HookType]hooks.HookType{
	hooks.CreatePhysical: hooks.GetPhysical, hooks.UpdatePhysical: hooks.GetPhysical,
	hooks.CreateVirtual: hooks.GetVirtual, hooks.UpdateVirtual: hooks.GetVirtual,
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
// forward operations ops (computed between the two documents, which must be valid JSON). One
// jsonscan.Index per document: k operations in an array of N elements cost O(N + k).
func undoEntries(ops []patch.Operation, before, after []byte) []UndoEntry {
	bx, ax := jsonscan.NewIndex(before), jsonscan.NewIndex(after)
	entries := make([]UndoEntry, 0, len(ops))
	for _, op := range ops {
		if e, ok := arrayEntry(op, bx, ax); ok {
			entries = append(entries, e)
			continue
		}
		e := UndoEntry{Path: op.Path}
		if v, ok := ax.Lookup(op.Path); ok {
			e.Hooked = json.RawMessage(v)
		}
		if v, ok := bx.Lookup(op.Path); ok {
			e.Original = json.RawMessage(v)
		}
		entries = append(entries, e)
	}
	return entries
}

// arrayEntry returns the entry of an operation that inserts an element into an array (an add
// at an index, or "-") or removes one from it: undo.OpRemove with the inserted element, or
// undo.OpInsert with the removed one (read from before: the diff removes the highest index
// first, so before's index is the element's). ok is false for any other operation.
func arrayEntry(op patch.Operation, before, after *jsonscan.Index) (UndoEntry, bool) {
	if op.Operation != "add" && op.Operation != "remove" {
		return UndoEntry{}, false
	}
	cut := strings.LastIndexByte(op.Path, '/')
	if cut < 0 {
		return UndoEntry{}, false
	}
	last := op.Path[cut+1:]
	if last != "-" && strings.Trim(last, "0123456789") != "" || last == "" {
		return UndoEntry{}, false
	}
	doc := after
	if op.Operation == "remove" {
		doc = before
	}
	parent, ok := doc.Lookup(op.Path[:cut])
	if !ok || len(parent) == 0 || parent[0] != '[' {
		return UndoEntry{}, false
	}
	if last == "-" {
		els, _ := jsonscan.Elements(parent)
		last = strconv.Itoa(len(els) - 1)
	}
	path := op.Path[:cut+1] + last
	v, ok := doc.Lookup(path)
	if !ok {
		return UndoEntry{}, false
	}
	if op.Operation == "add" {
		return UndoEntry{Op: undo.OpRemove, Path: path, Hooked: json.RawMessage(v)}, true
	}
	return UndoEntry{Op: undo.OpInsert, Path: path, Original: json.RawMessage(v)}, true
}

// undoEntriesOf is undoEntries without the document after the operations, for a patch shaped
// as patch.Diff makes them: only add, replace and remove; no path at or under another's; no
// "-"; and among the operations on one array (paths that end in an index) every replace
// before the adds or removes' indices, adds at increasing indices or removes at decreasing
// ones, never both. Then what the patch leaves at each path is the operation's value, and
// what was there is before's value at that path, so nothing needs applying. ok is false for
// any other patch: undoEntries takes it, on the applied document.
func undoEntriesOf(ops []patch.Operation, before *jsonscan.Index) ([]UndoEntry, bool) {
	if !diffShaped(ops, before) {
		return nil, false
	}
	entries := make([]UndoEntry, 0, len(ops))
	for _, op := range ops {
		var value json.RawMessage
		if op.Operation != "remove" {
			switch v := op.Value.(type) {
			case json.RawMessage:
				value = v
			default:
				b, err := json.Marshal(v)
				if err != nil {
					return nil, false
				}
				value = b
			}
		}
		cut := strings.LastIndexByte(op.Path, '/')
		parent, ok := before.Lookup(op.Path[:cut])
		if !ok || len(parent) == 0 || parent[0] != '{' && parent[0] != '[' {
			return nil, false // the patch does not apply to before
		}
		original, had := before.Lookup(op.Path)
		switch {
		case parent[0] == '[' && op.Operation == "add":
			entries = append(entries, UndoEntry{Op: undo.OpRemove, Path: op.Path, Hooked: value})
		case parent[0] == '[' && op.Operation == "remove":
			if !had {
				return nil, false
			}
			entries = append(entries, UndoEntry{Op: undo.OpInsert, Path: op.Path, Original: json.RawMessage(original)})
		default:
			if op.Operation != "add" && !had {
				return nil, false
			}
			e := UndoEntry{Path: op.Path, Hooked: value}
			if had {
				e.Original = json.RawMessage(original)
			}
			entries = append(entries, e)
		}
	}
	return entries, true
}

// diffShaped reports whether ops, a patch of before, has the shape undoEntriesOf needs (see
// there).
func diffShaped(ops []patch.Operation, before *jsonscan.Index) bool {
	type arrayOps struct {
		op               string // "add" or "remove", once there is one
		maxReplace, last int    // the highest replaced index; the last added or removed one
		lowest           int    // the lowest added or removed index
	}
	paths := make(map[string]struct{}, len(ops))
	arrays := map[string]*arrayOps{}
	for _, op := range ops {
		if op.Operation != "add" && op.Operation != "replace" && op.Operation != "remove" || op.Path == "" || op.Path[0] != '/' {
			return false
		}
		if _, dup := paths[op.Path]; dup {
			return false
		}
		paths[op.Path] = struct{}{}
		cut := strings.LastIndexByte(op.Path, '/')
		last := op.Path[cut+1:]
		if last == "-" {
			return false
		}
		if parent, ok := before.Lookup(op.Path[:cut]); !ok || len(parent) == 0 || parent[0] != '[' {
			continue // a member of an object (undoEntriesOf refuses a missing parent)
		}
		i, err := strconv.Atoi(last)
		if err != nil {
			return false
		}
		a := arrays[op.Path[:cut]]
		if a == nil {
			a = &arrayOps{maxReplace: -1}
			arrays[op.Path[:cut]] = a
		}
		switch {
		case op.Operation == "replace":
			if a.op != "" && i >= a.lowest {
				return false
			}
			a.maxReplace = max(a.maxReplace, i)
			continue
		case i <= a.maxReplace,
			a.op != "" && a.op != op.Operation,
			a.op == "add" && i <= a.last,
			a.op == "remove" && i >= a.last:
			return false
		}
		if a.op == "" || i < a.lowest {
			a.lowest = i
		}
		a.op, a.last = op.Operation, i
	}
	for p := range paths { // no path under another
		for cut := strings.LastIndexByte(p, '/'); cut > 0; cut = strings.LastIndexByte(p[:cut], '/') {
			if _, held := paths[p[:cut]]; held {
				return false
			}
		}
	}
	return true
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

// undoView returns the view of the stored object raw that the read chain c hands on: raw with
// the plan's steps applied, UndoAnnotation removed and the carried entries sealed on it again,
// when that leaves identity alone. Otherwise view is nil and reason says why the annotation was
// dropped. err is a *DecodeError when raw is not valid JSON.
func (rn *call) undoView(ctx context.Context, c *chain, raw []byte, p undoPlan) (view []byte, reason string, err error) {
	tree, err := decodeTree(raw)
	if err != nil {
		return nil, "", &DecodeError{GVK: c.key.GVK, Err: err}
	}
	id := identityOfTree(tree)
	if reason := applyUndoSteps(ctx, tree, p.steps); reason != "" {
		return nil, reason, nil
	}
	if identityOfTree(tree) != id { // cannot happen after the checks above
		return nil, UndoIdentity, nil
	}
	if len(p.carry) > 0 { // what the view cannot leave out stays recorded on it
		// Sealed as the kind's Update chain seals them alone, so that a view of an object
		// that holds only these entries is the object itself.
		wc := rn.reg.chains[Key{GVK: c.key.GVK, Type: updateType(c.key.Type)}]
		if wc == nil {
			wc = &chain{key: c.key}
		}
		if value, err := rn.reg.sealUndo(wc, raw, nil, p.carry); err == nil {
			setAnnotation(tree, UndoAnnotation, value)
		}
	}
	if view, err = json.Marshal(tree); err != nil {
		return nil, UndoMalformed, nil
	}
	return view, "", nil
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
		switch s.entry.Op {
		case undo.OpInsert: // the hooks removed an element: insert it again
			if s.entry.Original != nil && isArrayIndex(tree, s.tokens) {
				setAt(tree, s.tokens, original)
			}
			continue
		case undo.OpRemove: // the hooks inserted an element: remove it if it is still there
			if cur, has := lookupTree(tree, s.tokens); has && isArrayIndex(tree, s.tokens) && reflect.DeepEqual(cur, hooked) {
				removeAt(tree, s.tokens)
			}
			continue
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

// setAnnotation sets the annotation key to value on the decoded object tree, making the
// annotations map when it is absent; false when metadata is not an object.
func setAnnotation(tree any, key, value string) bool {
	meta, _ := lookupTree(tree, []string{"metadata"})
	m, ok := meta.(map[string]any)
	if !ok {
		return false
	}
	ann, ok := m["annotations"].(map[string]any)
	if !ok {
		ann = map[string]any{}
		m["annotations"] = ann
	}
	ann[key] = value
	return true
}

// isArrayIndex reports whether tokens address an index (0..len) of an array in tree.
func isArrayIndex(tree any, tokens []string) bool {
	parent, ok := lookupTree(tree, tokens[:len(tokens)-1])
	a, isArray := parent.([]any)
	if !ok || !isArray {
		return false
	}
	_, ok = arrayIndex(tokens[len(tokens)-1], len(a))
	return ok && tokens[len(tokens)-1] != "-"
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
		return slices.Insert(a, i, v), true // the tree is the caller's own copy: edited in place
	})
}

// removeAt removes the value at tokens; false when there is none.
func removeAt(tree any, tokens []string) bool {
	return editParent(tree, tokens, func(m map[string]any, key string) bool {
		_, ok := m[key]
		delete(m, key)
		return ok
	}, func(a []any, i int) ([]any, bool) {
		if i >= len(a) {
			return a, false
		}
		return slices.Delete(a, i, i+1), true
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
