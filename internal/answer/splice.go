package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
// intake refuses) is another member. top (may be nil) are raw's top-level members as a scan
// read them, each key once, values sub-slices of raw: Splice does not read raw's top level
// again (members that are no sub-slices of raw it does not trust, and reads raw). Each object on
// the way to the operations' parents is read once per call, however many operations go under
// it. Errors: an operation that does not apply to raw, or a value that does not encode.
func Splice(t reflect.Type, raw []byte, top []jsonscan.Member, ops []patch.Operation) ([]byte, error) {
	return SpliceVia(t, raw, top, nil, ops)
}

// SpliceVia is Splice for a caller that keeps an index of raw, x (nil: none), such as the
// engine's intake record: an operation's parent object and its member are taken from what x
// holds already (split objects, held values, members a walk found: jsonscan.Index.Known and
// Member), or read by one walk of the parent where it is the only operation's parent, rather
// than scanned from the top; where x holds neither, or an answer that is not one unique object,
// Splice scans raw as it does without x. The answer is the same byte for byte.
func SpliceVia(t reflect.Type, raw []byte, top []jsonscan.Member, x *jsonscan.Index, ops []patch.Operation) ([]byte, error) {
	if len(ops) == 0 {
		return raw, nil
	}
	if out, ok := spliceInto(t, raw, top, x, ops); ok {
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
func spliceInto(t reflect.Type, raw []byte, top []jsonscan.Member, x *jsonscan.Index, ops []patch.Operation) (out []byte, ok bool) {
	whole := structType(t) == nil // the answer decodes itself: any object is reset like a map
	resets := resetMaps(t, whole, ops)
	// most patches: metadata and a map or two, a few operations; on the stack
	var objectsBuf [8]scannedObject
	var membersBuf [48]scannedMember
	var editsBuf [8]spliceEdit
	var tokensBuf [8]string
	sc := scans{source: &source{raw: raw, top: top, ops: ops}, objects: objectsBuf[:0], members: membersBuf[:0]}
	edits := editsBuf[:0]
	texts := make([]byte, 0, textSize(ops)) // the inserted members and values, one after the other
	grow := 0
	for i := range ops {
		var e spliceEdit
		p := parentPath(ops[i].Path)
		if slices.ContainsFunc(resets, func(r reset) bool { return r.path == p }) {
			continue
		}
		tokens, ok := pointerTokens(ops[i].Path, tokensBuf[:0])
		if !ok || len(tokens) == 0 {
			return nil, false
		}
		last := tokens[len(tokens)-1]
		at, held := placeVia(x, raw, p, last, alone(ops, i, p))
		if !held {
			var parent valueAt
			sc, parent = sc.scan(tokens[:len(tokens)-1], p)
			at = sc.place(parent, last)
		}
		if e, texts, ok = spliceOf(t, whole, raw, &ops[i], tokens, at, texts); !ok {
			return nil, false
		}
		grow += len(e.text) + 1
		edits = append(edits, e)
	}
	for _, r := range resets {
		sc, _ = sc.scan(r.tokens, r.path)
		e, ok := resetOf(&sc, r, ops)
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

// textSize is about the bytes that spliceOf's texts for ops take: each member's key and value.
func textSize(ops []patch.Operation) int {
	n := 0
	for i := range ops {
		n += len(ops[i].Path) + 16
		switch v := ops[i].Value.(type) {
		case string:
			n += len(v) + len(v)/8
		case json.RawMessage:
			n += len(v)
		}
	}
	return n
}

// parentPath returns the JSON Pointer of the value that holds the member at path ("": the root).
func parentPath(path string) string { return path[:max(strings.LastIndexByte(path, '/'), 0)] }

// reset is a map that a removal in the patch takes a key off: Splice gives it whole (resetOf).
type reset struct {
	path   string
	tokens []string
}

// resetMaps returns, in the order ops first name them, the maps that a removal in ops takes a
// key off (for whole, the objects).
func resetMaps(t reflect.Type, whole bool, ops []patch.Operation) []reset {
	var resets []reset
	for i := range ops {
		if ops[i].Operation != "remove" {
			continue
		}
		p := parentPath(ops[i].Path)
		if p == "" || slices.ContainsFunc(resets, func(r reset) bool { return r.path == p }) {
			continue
		}
		tokens, ok := pointerTokens(p, make([]string, 0, strings.Count(p, "/")))
		pt := typeAt(t, tokens)
		for pt != nil && pt.Kind() == reflect.Pointer {
			pt = pt.Elem()
		}
		if ok && (whole || pt != nil && pt.Kind() == reflect.Map && !decodesItself(pt)) {
			resets = append(resets, reset{p, tokens})
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

// keyEdit is what the operations on one key of a reset map leave: gone, or the value text.
type keyEdit struct {
	key         string
	text        []byte
	plain, gone bool // plain: plainName(key)
}

// resetOf returns the edit that gives the map r (a member of an object in raw, read by sc) the
// result of ops' operations on its keys, reset: null, then the map whole under its key (its
// other members as raw's bytes), or null alone when no key is left.
func resetOf(sc *scans, r reset, ops []patch.Operation) (spliceEdit, bool) {
	raw := sc.raw
	s, _, ok := sc.value(r.tokens[:len(r.tokens)-1])
	if !ok || raw[s] != '{' {
		return spliceEdit{}, false // an array's element has no key to give the map under
	}
	start, end, ok := sc.value(r.tokens)
	if !ok || raw[start] != '{' {
		return spliceEdit{}, false
	}
	object, seen := sc.object(start)
	if !seen {
		return spliceEdit{}, false
	}
	var keys []keyEdit
	size := end - start + len(r.path) + 8
	for i := range ops {
		op := &ops[i]
		if parentPath(op.Path) != r.path {
			continue
		}
		key, ok := jsonscan.UnescapeToken(op.Path[len(r.path)+1:])
		if !ok {
			return spliceEdit{}, false
		}
		at := slices.IndexFunc(keys, func(k keyEdit) bool { return k.key == key })
		if at < 0 {
			_, count := sc.member(object, key)
			if count > 1 {
				return spliceEdit{}, false // a repeated key: the Doc says what an operation does
			}
			keys, at = append(keys, keyEdit{key: key, plain: plainName(key), gone: count == 0}), len(keys)
		}
		k := &keys[at]
		switch {
		case op.Operation == "remove" && !k.gone:
			k.gone = true
		case op.Operation == "add" || op.Operation == "replace" && !k.gone:
			if k.text, ok = appendOpValue(nil, op.Value); !ok {
				return spliceEdit{}, false
			}
			k.gone = false
			size += len(key) + len(k.text) + 4
		default: // a remove or replace of a key that is not there: Of reports it
			return spliceEdit{}, false
		}
	}
	text := append(make([]byte, 0, size), "null,"...)
	text = append(jsonscan.AppendString(text, r.tokens[len(r.tokens)-1]), ':', '{')
	empty := len(text)
	member := func(key, value []byte) {
		if len(text) > empty {
			text = append(text, ',')
		}
		text = append(append(append(text, key...), ':'), value...)
	}
	for i := object.first; i >= 0 && object.n > 0; i = sc.members[i].next {
		m := &sc.members[i]
		if at := slices.IndexFunc(keys, func(k keyEdit) bool { return sc.is(m, k.key, k.plain) }); at < 0 {
			member(sc.key(m), raw[m.start:m.end])
		} else if k := &keys[at]; !k.gone && k.text != nil {
			member(sc.key(m), k.text)
			k.text = nil // given
		}
	}
	for _, k := range keys {
		if !k.gone && k.text != nil { // a key raw's map lacks
			member(jsonscan.AppendString(nil, k.key), k.text)
		}
	}
	if text = append(text, '}'); len(text) == empty+1 {
		text = null
	}
	return spliceEdit{start: start, end: end, text: text, parent: -1}, true
}

// place is where an operation goes in raw: its parent, an object at raw[start:end] (ok false:
// none, or no object), whether that has members, and the last member of the operation's key,
// its value at raw[m.start:m.end], and how many members have that key.
type place struct {
	start, end int
	ok         bool
	members    bool
	m          scannedMember
	count      int
}

// place returns the place of the member key of the object at (which scan read) in raw.
func (sc *scans) place(at valueAt, key string) place {
	if !at.ok || sc.raw[at.start] != '{' {
		return place{}
	}
	o, seen := sc.object(at.start)
	if !seen {
		return place{}
	}
	m, count := sc.member(o, key)
	return place{start: at.start, end: at.end, ok: true, members: o.n > 0, m: m, count: count}
}

// alone reports whether ops[i] is the only operation of ops whose parent is the pointer
// parent (looked for in a patch of at most 16 operations: linear in the patch).
func alone(ops []patch.Operation, i int, parent string) bool {
	if len(ops) > 16 {
		return false
	}
	for j := range ops {
		if j != i && parentPath(ops[j].Path) == parent {
			return false
		}
	}
	return true
}

// placeVia returns the place of the member key of the object at the pointer parent in raw as
// the index x of raw holds it (read: or as one walk of the parent finds it, when x does not
// hold its members), and true when x answered with one unique object that is part of raw and
// at most one member of that key there; false (nil x too): the caller scans raw.
func placeVia(x *jsonscan.Index, raw []byte, parent, key string, read bool) (place, bool) {
	if x == nil {
		return place{}, false
	}
	v, ok, known := x.Known(parent)
	start, in := offsetIn(raw, v)
	if !known || !ok || !in || v[0] != '{' {
		return place{}, false
	}
	value, count, _, known := x.Member(parent, key, read)
	if !known || count > 1 {
		return place{}, false
	}
	p := place{start: start, end: start + len(v), ok: true, count: count}
	if i := jsonscan.SkipSpace(raw, start+1); i < len(raw) {
		p.members = raw[i] != '}'
	}
	if count == 1 {
		at, in := offsetIn(raw, value)
		if !in || len(value) == 0 {
			return place{}, false
		}
		p.m = scannedMember{start: at, end: at + len(value)}
	}
	return p, true
}

// offsetIn returns the offset of v in raw, when v is a non-empty sub-slice of raw.
func offsetIn(raw, v []byte) (int, bool) {
	at := cap(raw) - cap(v)
	if len(v) == 0 || at < 0 || at+len(v) > len(raw) || &raw[at] != &v[0] {
		return 0, false
	}
	return at, true
}

// spliceOf returns the edit of raw that op (at the reference tokens, one or more) makes, when
// it is one Splice makes by hand, for an object of Go type t (whole: one that decodes itself);
// at is where it goes.
func spliceOf(t reflect.Type, whole bool, raw []byte, op *patch.Operation, tokens []string, at place, texts []byte) (spliceEdit, []byte, bool) {
	last := tokens[len(tokens)-1]
	start, end := at.start, at.end
	if !at.ok {
		return spliceEdit{}, texts, false // a parent that is no object (an array index: not by hand)
	}
	m, count := at.m, at.count
	found := count == 1
	if count > 1 {
		return spliceEdit{}, texts, false
	}
	if op.Operation == "remove" { // a member that null zeroes (a removed map key: resetOf)
		ft := typeAt(t, tokens)
		if whole || !found || ft == nil || ft.Kind() != reflect.Pointer && (!slices.Contains(nullKinds, ft.Kind()) || decodesItself(ft)) {
			return spliceEdit{}, texts, false
		}
		return spliceEdit{start: m.start, end: m.end, text: null, parent: -1}, texts, true
	}
	from := len(texts) // the member to insert (absent), or the value in place of m's
	if !found {
		texts = append(jsonscan.AppendString(texts, last), ':')
	}
	texts, ok := appendOpValue(texts, op.Value)
	if !ok {
		return spliceEdit{}, texts, false
	}
	text := texts[from:len(texts):len(texts)]
	value := raw[m.start:m.end]
	switch op.Operation {
	case "replace":
		if !found || !scalar(value) || !scalar(text) {
			return spliceEdit{}, texts, false
		}
	case "add":
		if found && !scalar(value) {
			return spliceEdit{}, texts, false // a merging decoder would merge into what is there
		}
	default:
		return spliceEdit{}, texts, false
	}
	if found {
		return spliceEdit{start: m.start, end: m.end, text: text, parent: -1}, texts, true
	}
	closing := end - 1 // the object is trimmed: its last byte is '}'
	return spliceEdit{start: closing, end: closing, text: text, parent: start, comma: at.members}, texts, true
}

// nullKinds are the kinds besides a pointer that null zeroes, as a fresh decode leaves them.
var nullKinds = []reflect.Kind{reflect.Map, reflect.Slice, reflect.Interface}

// appendOpValue appends an operation's value as JSON text (ok false when it does not encode,
// or is not one JSON value).
func appendOpValue(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return jsonscan.AppendString(b, v), true
	case json.RawMessage:
		t := bytes.TrimSpace(v)
		return append(b, t...), len(t) > 0
	default:
		enc, err := json.Marshal(v)
		return append(b, enc...), err == nil
	}
}

// pointerTokens is patch.ParsePointer without its error, and without a slice per step: the
// tokens appended to buf[:0].
func pointerTokens(p string, buf []string) ([]string, bool) {
	if p == "" || p[0] != '/' {
		return nil, p == ""
	}
	tokens := buf[:0]
	for tok := range strings.SplitSeq(p[1:], "/") {
		tok, ok := jsonscan.UnescapeToken(tok)
		if !ok {
			return nil, false
		}
		tokens = append(tokens, tok)
	}
	return tokens, true
}

// scalar reports whether the trimmed JSON value v is a string, number, boolean or null.
func scalar(v []byte) bool {
	return len(v) > 0 && v[0] != '{' && v[0] != '['
}

// scans holds the objects of raw that a call's operations go through, each read once (scan):
// their members as offsets into raw, for every operation under them, so that k operations on
// one map cost one read of the map and of the objects above it, not k; and a map on the way
// is read as its parent's scan passes it, not skipped and then read again.
type scans struct {
	*source
	objects []scannedObject
	members []scannedMember // the members of objects, each object's in one run
}

// source is what scans reads: raw, and top (may be nil), raw's top-level members as a scan read
// them (see Splice). (One pointer away from the buffers of scans, so that what reads raw lets
// them stay on the caller's stack.)
type source struct {
	raw []byte
	top []jsonscan.Member
	ops []patch.Operation // an object on the way to one of them is read with the one it is in
}

// scannedObject is an object of raw (at start) with n members: members[first], then each
// member's next.
type scannedObject struct {
	start, first, n int
}

// scannedMember is a member of a scanned object: its key literal as written at
// raw[keyStart:keyEnd] (keyEnd 0: the member top[keyStart]), its trimmed value at
// raw[start:end], and the index in members of its object's next member (-1: none; an object
// read inside another puts its members between the other's). It holds offsets only, no
// pointers: scans' buffers can stay on the stack.
type scannedMember struct {
	keyStart, keyEnd, start, end, next int
}

// key returns the member's key literal as written (quotes and escapes included).
func (sc *scans) key(m *scannedMember) []byte {
	if m.keyEnd == 0 {
		return jsonscan.AppendString(nil, sc.top[m.keyStart].Key)
	}
	return sc.raw[m.keyStart:m.keyEnd]
}

// is reports whether the member m's key is name, matching keys as written (as jsonscan.Find);
// plain says name is printable ASCII without a quote or backslash (plainName), which it can
// then tell without reading the key's literal through.
func (sc *scans) is(m *scannedMember, name string, plain bool) bool {
	if m.keyEnd == 0 {
		return sc.top[m.keyStart].Key == name
	}
	lit := sc.raw[m.keyStart:m.keyEnd]
	if inner := lit[1 : len(lit)-1]; plain {
		// Only an escape changes the length of a literal's text that is such a name (it
		// shortens it), and the text as written is the name only where it has none.
		switch {
		case len(inner) < len(name):
			return false
		case len(inner) == len(name):
			return string(inner) == name
		case bytes.IndexByte(inner, '\\') < 0:
			return false
		}
	}
	s, _ := jsonscan.String(lit)
	return s == name
}

// plainName reports whether name is printable ASCII without a quote or backslash: the text of
// a string literal that is exactly the name between quotes.
func plainName(name string) bool {
	for i := range len(name) {
		if c := name[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// scan returns sc with every object on the way to the value at the reference tokens, and that
// value when it is one, read (value then finds them), and where that value is; path is the JSON Pointer of tokens, as
// written in an operation's path. sc is a value, and so are its slices' headers: a caller's
// buffers for them stay on its stack.
func (sc scans) scan(tokens []string, path string) (scans, valueAt) {
	start, end, ok := sc.root()
	at := 0 // the end of the pointer of the value at start in path
	for i := 0; ok; i++ {
		if sc.raw[start] == '{' {
			if _, seen := sc.object(start); !seen {
				sc, _ = sc.read(start, end, path[:at])
			}
		}
		if i == len(tokens) {
			break
		}
		if next := strings.IndexByte(path[at+1:], '/'); next >= 0 {
			at += 1 + next
		} else {
			at = len(path)
		}
		start, end, ok = sc.step(start, end, tokens[i])
	}
	return sc, valueAt{start, end, ok}
}

// valueAt is where a value is in raw (raw[start:end]), ok false when there is none.
type valueAt struct {
	start, end int
	ok         bool
}

// read returns sc with the members of the object that starts at raw[start] (and ends by end)
// added, and the offset just past the object: top's members when it is raw's top level and
// every member of top is a sub-slice of raw, else as a scan reads them. A member that is an
// object on the way to an operation (its pointer, prefix and the member's key, begins an
// operation's path's parent) is read with it, so that its bytes are scanned once.
func (sc scans) read(start, end int, prefix string) (scans, int) {
	o := scannedObject{start: start, first: len(sc.members)}
	raw := sc.raw
	fromTop := start == jsonscan.SkipSpace(raw, 0) && sc.top != nil
	for i, m := range sc.top {
		at := cap(raw) - cap(m.Value)
		if !fromTop || len(m.Value) == 0 || at < 0 || at+len(m.Value) > len(raw) || &raw[at] != &m.Value[0] {
			fromTop = false
			break
		}
		sc.members = append(sc.members, scannedMember{keyStart: i, start: at, end: at + len(m.Value), next: len(sc.members) + 1})
	}
	if fromTop {
		if o.n = len(sc.top); o.n > 0 {
			sc.members[len(sc.members)-1].next = -1
		}
		sc.objects = append(sc.objects, o)
		return sc, end
	}
	sc.members = sc.members[:o.first]
	o.first = -1
	last := -1
	object := raw[:end]
	i := jsonscan.SkipSpace(object, start+1)
	for i < end && object[i] == '"' {
		keyEnd := jsonscan.SkipValue(object, i)
		v := jsonscan.SkipSpace(object, jsonscan.SkipSpace(object, keyEnd)+1) // past the colon
		if v >= end {
			break
		}
		vEnd := -1
		if object[v] == '{' {
			if inner, ok := sc.onTheWay(prefix, object[i:keyEnd]); ok {
				sc, vEnd = sc.read(v, end, inner)
			}
		}
		if vEnd < 0 {
			vEnd = jsonscan.SkipValue(object, v)
		}
		sc.members = append(sc.members, scannedMember{keyStart: i, keyEnd: keyEnd, start: v, end: vEnd, next: -1})
		if last >= 0 {
			sc.members[last].next = len(sc.members) - 1
		} else {
			o.first = len(sc.members) - 1
		}
		last = len(sc.members) - 1
		o.n++
		if i = jsonscan.SkipSpace(object, vEnd); i >= end || object[i] != ',' {
			break
		}
		i = jsonscan.SkipSpace(object, i+1)
	}
	if i < end && object[i] == '}' {
		i++
	}
	sc.objects = append(sc.objects, o)
	return sc, i
}

// onTheWay returns the pointer of the member whose key literal is key in the object at the
// pointer prefix, as an operation's path writes it, when the parent of an operation's target
// is that member or inside it. It only says which objects to read early: a key written with
// escapes, or whose text an operation's path writes escaped, is never on the way.
func (sc *scans) onTheWay(prefix string, key []byte) (string, bool) {
	text := key[1 : len(key)-1]
	n := len(prefix) + 1 + len(text)
	for i := range sc.ops {
		p := sc.ops[i].Path
		if len(p) > n && p[n] == '/' && p[len(prefix)] == '/' && p[len(prefix)+1:n] == string(text) && p[:len(prefix)] == prefix {
			return p[:n], true
		}
	}
	return "", false
}

// root returns the offsets in raw of its trimmed value.
func (sc *scans) root() (start, end int, ok bool) {
	start = jsonscan.SkipSpace(sc.raw, 0)
	end = len(bytes.TrimRight(sc.raw, " \t\r\n"))
	return start, end, start < end
}

// step returns the offsets in raw of the value at tok in the value raw[start:end]: the member
// of a scanned object (present once: a repeated key gives ok false) or an array's element (a
// decimal index).
func (sc *scans) step(start, end int, tok string) (int, int, bool) {
	switch sc.raw[start] {
	case '{':
		o, seen := sc.object(start)
		if m, count := sc.member(o, tok); seen && count == 1 {
			return m.start, m.end, true
		}
	case '[':
		return element(sc.raw, start, end, tok)
	}
	return 0, 0, false
}

// value returns the offsets in raw of the trimmed value at the reference tokens, through the
// objects scan read (ok false where it read none) and arrays.
func (sc *scans) value(tokens []string) (start, end int, ok bool) {
	start, end, ok = sc.root()
	for _, tok := range tokens {
		if !ok {
			break
		}
		start, end, ok = sc.step(start, end, tok)
	}
	return start, end, ok
}

// object returns the object at start, when scan read it.
func (sc *scans) object(start int) (scannedObject, bool) {
	for _, o := range sc.objects {
		if o.start == start {
			return o, true
		}
	}
	return scannedObject{}, false
}

// member returns the last member of o named key (the one encoding/json's Unmarshal uses) and
// how many members have that name.
func (sc *scans) member(o scannedObject, key string) (m scannedMember, count int) {
	plain := plainName(key)
	for i := o.first; i >= 0 && o.n > 0; i = sc.members[i].next {
		mi := &sc.members[i]
		switch n := mi.keyEnd - mi.keyStart - 2; { // is, inline where it can
		case mi.keyEnd == 0:
			if sc.top[mi.keyStart].Key != key {
				continue
			}
		case plain && n <= len(key):
			if n < len(key) || string(sc.raw[mi.keyStart+1:mi.keyEnd-1]) != key {
				continue
			}
		case !sc.is(mi, key, plain):
			continue
		}
		m, count = *mi, count+1
	}
	return m, count
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
