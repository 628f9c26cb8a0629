package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// Splice returns the answer for the request object raw (valid JSON, as the chain checked it)
// and ops, the patch from raw to the hooked object as the typed compare makes it (moved onto
// raw: patch.RebaseVia, the sealed undo's operation included), for an object of Go type t: the
// same answer as Of(t, raw's Doc with ops applied) — decoded with encoding/json INTO the object
// raw encodes, and into a new one, it gives exactly raw with ops applied — made with only the
// work the change needs. It splices into one copy of raw's bytes, where every operation adds a
// member to an object that raw holds (the member absent, or holding a scalar), replaces a
// scalar by a scalar, or removes a member, at a path raw holds (an operation inside what
// another adds finds no parent there), no two on one value. A removed member whose field is a
// map, slice, pointer or interface becomes null; a map (of t, or any object when t decodes
// itself) that loses a key is reset as Of resets it — null, then the map whole under its key
// again (null alone when it is left empty), its kept members as raw's bytes — since a merging
// decoder keeps the keys it lacks. Nothing else of raw is decoded or encoded, and members raw
// holds that t does not know stay as they are. Any other patch goes through Of. Like Of it
// matches keys as written: a key that differs from another only in case (which the engine's
// intake refuses) is another member. Errors: an operation that does not apply to raw, or a
// value that does not encode (as Of).
func Splice(t reflect.Type, raw []byte, ops []patch.Operation) ([]byte, error) {
	if len(ops) == 0 {
		return raw, nil
	}
	if out, ok := spliceInto(t, raw, ops); ok {
		return out, nil
	}
	doc := jsondoc.New(raw)
	if err := doc.ApplyOps(ops); err != nil {
		return nil, fmt.Errorf("apply the hooks' patch: %w", err)
	}
	return Of(t, doc)
}

// spliceEdit is one splice into raw: raw[start:end] (empty: an insertion) becomes text.
type spliceEdit struct {
	start, end int
	text       []byte
	// parent is the offset of the object an insertion goes into (-1: a replacement), and
	// comma says the parent had members before: an insertion after them needs a comma.
	parent int
	comma  bool
}

// spliceInto is Splice by hand; ok is false when ops is not a patch it splices (see Splice).
func spliceInto(t reflect.Type, raw []byte, ops []patch.Operation) (out []byte, ok bool) {
	whole := structType(t) == nil // the answer decodes itself: any object is reset like a map
	resets := resetMaps(t, whole, ops)
	edits := make([]spliceEdit, 0, len(ops))
	grow := 0
	for i := range ops {
		var e spliceEdit
		if p, _ := parentPath(ops[i].Path); slices.Contains(resets, p) {
			continue
		}
		if e, ok = spliceOf(t, whole, raw, &ops[i]); !ok {
			return nil, false
		}
		grow += len(e.text) + 1
		edits = append(edits, e)
	}
	for _, p := range resets {
		e, ok := resetOf(raw, p, ops)
		if !ok {
			return nil, false
		}
		grow += len(e.text) + 1
		edits = append(edits, e)
	}
	slices.SortStableFunc(edits, func(a, b spliceEdit) int { return a.start - b.start })
	out = make([]byte, 0, len(raw)+grow)
	at := 0
	inserted := -1 // the parent of the last insertion: a second one into it needs a comma
	for _, e := range edits {
		if e.start < at {
			return nil, false // two operations on one value: they apply in order (the Doc)
		}
		out = append(out, raw[at:e.start]...)
		if e.parent >= 0 && (e.comma || inserted == e.parent) {
			out = append(out, ',')
		}
		if e.parent >= 0 {
			inserted = e.parent
		}
		out = append(out, e.text...)
		at = e.end
	}
	return append(out, raw[at:]...), true
}

// parentPath returns the JSON Pointer of the value that holds the member at path ("" for the
// root's members; ok false for the root).
func parentPath(path string) (string, bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", false
	}
	return path[:i], true
}

// resetMaps returns, in the order ops first name them, the paths of the maps that a removal
// in ops takes a key off (for whole, of the objects): Splice resets them (resetOf).
func resetMaps(t reflect.Type, whole bool, ops []patch.Operation) []string {
	var resets []string
	for i := range ops {
		p, ok := parentPath(ops[i].Path)
		if ops[i].Operation != "remove" || !ok || p == "" || slices.Contains(resets, p) {
			continue
		}
		tokens, err := patch.ParsePointer(p)
		if err != nil {
			continue
		}
		pt := typeAt(t, tokens)
		for pt != nil && pt.Kind() == reflect.Pointer {
			pt = pt.Elem()
		}
		if whole || (pt != nil && pt.Kind() == reflect.Map && !decodesItself(pt)) {
			resets = append(resets, p)
		}
	}
	return resets
}

// typeAt returns the Go type that the value at the reference tokens decodes into in a value
// of type t (nil: none known).
func typeAt(t reflect.Type, tokens []string) reflect.Type {
	for _, tok := range tokens {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == nil || decodesItself(t):
			return nil
		case t.Kind() == reflect.Struct:
			t = jsonFields(t).lookup(tok)
		case t.Kind() == reflect.Map || t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
			t = t.Elem()
		default:
			return nil
		}
	}
	return t
}

// resetOf returns the edit that gives the map at path p (a member of an object in raw) the
// result of ops' operations on its members, reset: null, then the map whole under its key.
func resetOf(raw []byte, p string, ops []patch.Operation) (spliceEdit, bool) {
	tokens, err := patch.ParsePointer(p)
	if err != nil || len(tokens) == 0 {
		return spliceEdit{}, false
	}
	if s, _, ok := locate(raw, tokens[:len(tokens)-1]); !ok || raw[s] != '{' {
		return spliceEdit{}, false // an array's element has no key to give the map under
	}
	start, end, ok := locate(raw, tokens)
	if !ok || raw[start] != '{' {
		return spliceEdit{}, false
	}
	type entry struct {
		name      string
		lit, text []byte // lit nil: a new member
	}
	var members []entry
	if !jsonscan.EachMember(raw[start:end], func(key, value []byte) bool {
		members = append(members, entry{string(jsonscan.MemberName(key)), key, value})
		return true
	}) {
		return spliceEdit{}, false
	}
	for i := range ops {
		op := &ops[i]
		if q, _ := parentPath(op.Path); q != p {
			continue
		}
		key, ok := jsonscan.UnescapeToken(op.Path[len(p)+1:])
		if !ok {
			return spliceEdit{}, false
		}
		at, count := -1, 0
		for j := range members {
			if members[j].name == key {
				at, count = j, count+1
			}
		}
		if count > 1 {
			return spliceEdit{}, false // a repeated key: the Doc says what the operation does
		}
		switch op.Operation {
		case "remove":
			if at < 0 {
				return spliceEdit{}, false // Of reports it
			}
			members = slices.Delete(members, at, at+1)
		case "add", "replace":
			value, ok := encodedScalarOrAny(op.Value)
			switch {
			case !ok || (at < 0 && op.Operation == "replace"):
				return spliceEdit{}, false
			case at < 0:
				members = append(members, entry{name: key, text: value})
			default:
				members[at].text = value
			}
		default:
			return spliceEdit{}, false
		}
	}
	text := []byte("null")
	if len(members) > 0 {
		text = jsonscan.AppendString(append(text, ','), tokens[len(tokens)-1])
		text = append(text, ':', '{')
		for j, m := range members {
			if j > 0 {
				text = append(text, ',')
			}
			if m.lit != nil {
				text = append(text, m.lit...)
			} else {
				text = jsonscan.AppendString(text, m.name)
			}
			text = append(append(text, ':'), m.text...)
		}
		text = append(text, '}')
	}
	return spliceEdit{start: start, end: end, text: text, parent: -1}, true
}

// spliceOf returns the edit of raw that op makes, when it is one Splice makes by hand, for an
// object of Go type t (whole: one that decodes itself).
func spliceOf(t reflect.Type, whole bool, raw []byte, op *patch.Operation) (spliceEdit, bool) {
	tokens, err := patch.ParsePointer(op.Path)
	if err != nil || len(tokens) == 0 {
		return spliceEdit{}, false
	}
	last := tokens[len(tokens)-1]
	start, end, ok := locate(raw, tokens[:len(tokens)-1])
	if !ok || raw[start] != '{' {
		return spliceEdit{}, false // a parent that is no object (an array index: not by hand)
	}
	parent := raw[start:end]
	m, count, found := jsonscan.Find(parent, last)
	if count > 1 {
		return spliceEdit{}, false
	}
	if op.Operation == "remove" { // a member that null zeroes (a removed map key: resetOf)
		ft := typeAt(t, tokens)
		if whole || !found || ft == nil || !nullable(ft) {
			return spliceEdit{}, false
		}
		vStart := start + m.End - len(m.Value)
		return spliceEdit{start: vStart, end: vStart + len(m.Value), text: null, parent: -1}, true
	}
	value, ok := encodedScalarOrAny(op.Value)
	if !ok {
		return spliceEdit{}, false
	}
	switch op.Operation {
	case "replace":
		if !found || !scalar(m.Value) || !scalar(value) {
			return spliceEdit{}, false
		}
	case "add":
		if found && !scalar(m.Value) {
			return spliceEdit{}, false // a merging decoder would merge into what is there
		}
	default:
		return spliceEdit{}, false
	}
	if found {
		vStart := start + m.End - len(m.Value)
		return spliceEdit{start: vStart, end: vStart + len(m.Value), text: value, parent: -1}, true
	}
	closing := end - 1 // parent is trimmed: its last byte is '}'
	text := jsonscan.AppendString(make([]byte, 0, len(last)+3+len(value)), last)
	text = append(append(text, ':'), value...)
	hasMembers := len(bytes.TrimSpace(parent[1:len(parent)-1])) > 0
	return spliceEdit{start: closing, end: closing, text: text, parent: start, comma: hasMembers}, true
}

// nullable reports whether null decodes into a value of type t as its zero value, the value a
// fresh decode leaves for an absent member.
func nullable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer:
		return true
	case reflect.Map, reflect.Slice, reflect.Interface:
		return !decodesItself(t)
	}
	return false
}

// encodedScalarOrAny returns an operation's value as JSON text (ok false when it does not
// encode, or is not one JSON value).
func encodedScalarOrAny(v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return jsonscan.AppendString(nil, v), true
	case json.RawMessage:
		t := bytes.TrimSpace(v)
		return t, len(t) > 0
	default:
		b, err := json.Marshal(v)
		return b, err == nil
	}
}

// scalar reports whether the trimmed JSON value v is a string, number, boolean or null.
func scalar(v []byte) bool {
	return len(v) > 0 && v[0] != '{' && v[0] != '['
}

// locate returns the offsets in raw of the trimmed value at the reference tokens, through
// objects (each key present once: a repeated key gives ok false) and arrays (a decimal index).
func locate(raw []byte, tokens []string) (start, end int, ok bool) {
	start = jsonscan.SkipSpace(raw, 0)
	end = len(bytes.TrimRight(raw, " \t\r\n"))
	for _, tok := range tokens {
		switch {
		case start < end && raw[start] == '{':
			m, count, found := jsonscan.Find(raw[start:end], tok)
			if !found || count > 1 {
				return 0, 0, false
			}
			vStart := start + m.End - len(m.Value)
			start, end = vStart, vStart+len(m.Value)
		case start < end && raw[start] == '[':
			if start, end, ok = element(raw, start, end, tok); !ok {
				return 0, 0, false
			}
		default:
			return 0, 0, false
		}
	}
	return start, end, start < end
}

// element returns the offsets in raw of the element tok (a decimal index) of the array
// raw[start:end].
func element(raw []byte, start, end int, tok string) (int, int, bool) {
	n, err := strconv.Atoi(tok)
	if err != nil || n < 0 || tok != strconv.Itoa(n) {
		return 0, 0, false
	}
	arr := raw[:end]
	i := jsonscan.SkipSpace(arr, start+1)
	for k := 0; i < end && arr[i] != ']'; k++ {
		next := jsonscan.SkipValue(arr, i)
		if next <= i {
			return 0, 0, false
		}
		if k == n {
			return i, next, true
		}
		i = jsonscan.SkipSpace(arr, next)
		if i >= end || arr[i] != ',' {
			return 0, 0, false
		}
		i = jsonscan.SkipSpace(arr, i+1)
	}
	return 0, 0, false
}
