package undo

// Recording: the entries of a write chain's change, from the JSON Patch that makes it.

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// Entries returns the entries that take the change from before to after back, for the
// forward operations ops (computed between the two documents, which must be valid JSON). One
// jsonscan.Index per document: k operations in an array of N elements cost O(N + k).
func Entries(ops []patch.Operation, before, after []byte) []Entry {
	bx, ax := jsonscan.NewIndex(before), jsonscan.NewIndex(after)
	entries := make([]Entry, 0, len(ops))
	lens := map[string]*int{} // the length of each array in after that an insert entry goes into
	for _, op := range ops {
		if e, ok := arrayEntry(op, bx, ax); ok {
			if e.Op == OpInsert {
				parent := e.Path[:strings.LastIndexByte(e.Path, '/')]
				if _, seen := lens[parent]; !seen { // once per array: the first entry carries it
					if v, ok := ax.Lookup(parent); ok {
						els, _ := jsonscan.Elements(v)
						e.Len = new(len(els))
					}
					lens[parent] = e.Len
				}
			}
			entries = append(entries, e)
			continue
		}
		e := Entry{Path: op.Path}
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
// at an index, or "-") or removes one from it: OpRemove with the inserted element, or
// OpInsert with the removed one (read from before: the diff removes the highest index
// first, so before's index is the element's). ok is false for any other operation.
func arrayEntry(op patch.Operation, before, after *jsonscan.Index) (Entry, bool) {
	if op.Operation != "add" && op.Operation != "remove" {
		return Entry{}, false
	}
	cut := strings.LastIndexByte(op.Path, '/')
	if cut < 0 {
		return Entry{}, false
	}
	last := op.Path[cut+1:]
	if last != "-" && strings.Trim(last, "0123456789") != "" || last == "" {
		return Entry{}, false
	}
	doc := after
	if op.Operation == "remove" {
		doc = before
	}
	parent, ok := doc.Lookup(op.Path[:cut])
	if !ok || len(parent) == 0 || parent[0] != '[' {
		return Entry{}, false
	}
	if last == "-" {
		els, _ := jsonscan.Elements(parent)
		last = strconv.Itoa(len(els) - 1)
	}
	path := op.Path[:cut+1] + last
	v, ok := doc.Lookup(path)
	if !ok {
		return Entry{}, false
	}
	if op.Operation == "add" {
		return Entry{Op: OpRemove, Path: path, Hooked: json.RawMessage(v)}, true
	}
	return Entry{Op: OpInsert, Path: path, Original: json.RawMessage(v)}, true
}

// EntriesOf is Entries without the document after the operations, for a patch shaped
// as patch.Diff makes them: only add, replace and remove; no path at or under another's; no
// "-"; and among the operations on one array (paths that end in an index) every replace
// before the adds or removes' indices, adds at increasing indices or removes at decreasing
// ones, never both. Then what the patch leaves at each path is the operation's value, and
// what was there is before's value at that path, so nothing needs applying. ok is false for
// any other patch: Entries takes it, on the applied document.
func EntriesOf(ops []patch.Operation, before *jsonscan.Index) ([]Entry, bool) {
	if !diffShaped(ops, before) {
		return nil, false
	}
	entries := make([]Entry, 0, len(ops))
	lens := hookedLens(ops, before)
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
		var original []byte
		var had bool
		if op.Operation == "add" && parent[0] == '{' && fewUnder(ops, op.Path[:cut]) {
			original, had = member(before, op.Path[:cut], op.Path[cut+1:])
		} else {
			original, had = before.Lookup(op.Path)
		}
		switch {
		case parent[0] == '[' && op.Operation == "add":
			entries = append(entries, Entry{Op: OpRemove, Path: op.Path, Hooked: value})
		case parent[0] == '[' && op.Operation == "remove":
			if !had {
				return nil, false
			}
			e := Entry{Op: OpInsert, Path: op.Path, Original: json.RawMessage(original)}
			if n, ok := lens[op.Path[:cut]]; ok { // once per array: the first entry carries it
				e.Len = n
				delete(lens, op.Path[:cut])
			}
			entries = append(entries, e)
		default:
			if op.Operation != "add" && !had {
				return nil, false
			}
			e := Entry{Path: op.Path, Hooked: value}
			if had {
				e.Original = json.RawMessage(original)
			}
			entries = append(entries, e)
		}
	}
	return entries, true
}

// member is before.Lookup of the member at the escaped reference token tok of the object at
// the pointer parent, read by one walk of it (jsonscan.Index.Member: the last member of that
// key, as the index finds it) rather than by splitting it into the index, its members and a
// map of them, which costs about three walks: for an add (a member that runTyped's compare
// found missing), whose object no lookup before EntriesOf split. The index keeps the answer,
// for the answer's splice (answer.SpliceVia) to read where the member goes.
func member(before *jsonscan.Index, parent, tok string) ([]byte, bool) {
	key, ok := jsonscan.UnescapeToken(tok)
	if !ok {
		return nil, false
	}
	v, count, _, _ := before.Member(parent, key, true)
	return v, count > 0
}

// fewUnder reports whether at most two operations of ops are on members of the object at
// parent: where one walk each (member) costs less than splitting it once. A patch of more
// than 16 operations takes the index (no count per operation: linear in the patch).
func fewUnder(ops []patch.Operation, parent string) bool {
	if len(ops) > 16 {
		return false
	}
	n := 0
	for _, op := range ops {
		if cut := strings.LastIndexByte(op.Path, '/'); cut >= 0 && op.Path[:cut] == parent {
			if n++; n > 2 {
				return false
			}
		}
	}
	return true
}

// hookedLens returns, for each array of before that a diff-shaped patch ops removes elements
// from, its length after ops: before's, plus the elements added, less those removed
// (Entry.Len).
func hookedLens(ops []patch.Operation, before *jsonscan.Index) map[string]*int {
	var delta map[string]int // per parent of an add or remove: added less removed
	removes := false
	for _, op := range ops {
		if op.Operation != "add" && op.Operation != "remove" {
			continue
		}
		if delta == nil {
			delta = map[string]int{}
		}
		d := 1
		if op.Operation == "remove" {
			d, removes = -1, true
		}
		delta[op.Path[:strings.LastIndexByte(op.Path, '/')]] += d
	}
	if !removes {
		return nil
	}
	lens := map[string]*int{}
	for parent, d := range delta {
		v, ok := before.Lookup(parent)
		if !ok || len(v) == 0 || v[0] != '[' {
			continue
		}
		els, _ := jsonscan.Elements(v)
		lens[parent] = new(len(els) + d)
	}
	return lens
}

// diffShaped reports whether ops, a patch of before, has the shape EntriesOf needs (see
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
		if parent, ok := before.Lookup(op.Path[:cut]); !ok || len(parent) == 0 || parent[0] != '[' {
			continue // a member of an object, "-" too (EntriesOf refuses a missing parent)
		}
		i, err := strconv.Atoi(last) // an index: never "-" (the end of the array) in a diff
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
func emptyMapEntry(path string) Entry {
	return Entry{Path: path, Hooked: json.RawMessage("{}")}
}

// created returns entries preceded by an emptyMapEntry for each map at paths (labels or
// annotations) that the change creates where the syncer sent none — the annotations map
// whenever the object has none, since the undo itself is written there: undone last, they
// remove the maps again when nothing else is left in them. The one place of that rule.
func created(entries []Entry, paths ...string) []Entry {
	for _, p := range paths {
		entries = append([]Entry{emptyMapEntry(p)}, entries...)
	}
	return entries
}

// recordOn returns entries as a write records them on an object whose annotations member is
// annotations (JSON; nil: absent): preceded by the empty-map entry of the annotations map
// (created) where the object has none, or null, since the undo itself is written there.
func recordOn(annotations []byte, entries []Entry) []Entry {
	if len(annotations) == 0 || string(annotations) == "null" {
		return created(entries, "/metadata/annotations")
	}
	return entries
}

// RecordOps returns ops, a JSON Patch of the object raw, followed by the operation that writes
// the undo of ops in the Annotation, sealed by seal; value is that value ("", ops as they are,
// when they change nothing an undo records). It is how every write that has a patch records
// its undo: the entries come from EntriesOf on before (raw's index) where it can read them on
// raw alone, and the annotation goes where raw's metadata member meta (hasMeta: present)
// holds them, whose annotations member is annotations (nil: none; the last one, as
// jsonscan.Find reads it in meta: the caller's scan has it); otherwise, or where an operation replaces metadata or its annotations whole,
// from the hooked object (ops applied: Entries) when whole is set, else ok is false and
// nothing is recorded (the caller takes a path that can). Errors: ops do not apply to raw, or
// seal's.
func RecordOps(raw []byte, before *jsonscan.Index, meta []byte, hasMeta bool, annotations []byte, ops []patch.Operation, whole bool, seal func([]Entry) (string, error)) (out []patch.Operation, value string, ok bool, err error) {
	entries, ok := EntriesOf(ops, before)
	for _, op := range ops {
		ok = ok && op.Path != "/metadata" && op.Path != "/metadata/annotations"
	}
	if !ok {
		if !whole {
			return ops, "", false, nil
		}
		p, err := patch.Marshal(ops)
		if err != nil {
			return ops, "", false, err
		}
		hooked, err := patch.Apply(raw, p)
		if err != nil {
			return ops, "", false, err
		}
		entries = Entries(ops, raw, hooked)
		m, _, found := jsonscan.Find(hooked, "metadata")
		meta, hasMeta = m.Value, found
		a, _, _ := jsonscan.Find(meta, "annotations") // the state of the annotations after ops
		annotations = a.Value
	}
	if len(entries) == 0 {
		return ops, "", true, nil
	}
	if value, err = seal(recordOn(annotations, entries)); err != nil {
		return ops, "", false, err
	}
	return append(ops, AnnotationOp(meta, hasMeta, annotations, value)), value, true, nil
}
