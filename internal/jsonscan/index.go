package jsonscan

import (
	"bytes"
	"strings"
	"unsafe"
)

// Index answers RFC 6901 JSON Pointer lookups in one document. Each object or array a lookup
// passes through is split into its members or elements once and remembered by its pointer, so
// k lookups of paths in an array of N elements cost O(N + k·depth) rather than O(N·k): the one
// walk a patch or an undo of k operations needs. The document is read, never copied or changed;
// an Index is not safe for concurrent use.
type Index struct {
	doc        []byte
	containers map[string]*container // by the escaped pointer of the object or array
	probes     []probe               // members read without splitting their object: Hold, Member
	probesBuf  [3]probe              // most documents: a held value and a member or two, here
}

// probe is a member of the object at the pointer parent that Hold noted or Member's walk read:
// its value (the last of that key), how many members have the key, and whether the keys on the
// way to parent are each there once.
type probe struct {
	parent, key string
	value       []byte
	count       int32
	unique      bool
}

// container is one object or array of the document, split.
type container struct {
	members  map[string]indexed // of an object, by unescaped key
	elements [][]byte           // of an array
	isArray  bool
	viaDup   bool // reached through a key that its object has more than once
}

// indexed is a member: the value of the last member of that key (the one encoding/json's
// Unmarshal uses) and how many members have the key.
type indexed struct {
	value []byte
	count int
}

// NewIndex returns an Index of the JSON document doc (leading and trailing white space ignored).
func NewIndex(doc []byte) *Index {
	return &Index{doc: bytes.TrimSpace(doc), containers: map[string]*container{}}
}

// NewIndexOf is NewIndex for an object doc whose members a scan has read already: top, in any
// order, each key once. Lookups start from them and never split doc's top level again.
func NewIndexOf(doc []byte, top []Member) *Index {
	x := NewIndex(doc)
	c := &container{members: make(map[string]indexed, len(top))}
	for _, m := range top {
		c.members[m.Key] = indexed{value: m.Value, count: c.members[m.Key].count + 1}
	}
	x.containers[""] = c
	return x
}

// Hold notes that value (trimmed; a sub-slice of the document) is the value at the JSON Pointer
// pointer, a member of an object (pointer's last token its key), reached through keys that
// every object on the way has once, pointer's own among them: what a caller's scan of the
// document read already. Lookups at and
// under pointer start from it, without splitting the objects above it.
func (x *Index) Hold(pointer string, value []byte) {
	cut := strings.LastIndexByte(pointer, '/')
	key, ok := UnescapeToken(pointer[cut+1:])
	if cut < 0 || !ok {
		return
	}
	x.note(probe{parent: pointer[:cut], key: key, value: value, count: 1, unique: true})
}

// note keeps p (Hold, Member).
func (x *Index) note(p probe) {
	if x.probes == nil {
		x.probes = x.probesBuf[:0]
	}
	x.probes = append(x.probes, p)
}

// probed returns the probe of the member key of the object at parent, when there is one.
func (x *Index) probed(parent, key string) (probe, bool) {
	for _, p := range x.probes {
		if p.parent == parent && p.key == key {
			return p, true
		}
	}
	return probe{}, false
}

// Member returns the value of the last member named key (unescaped) of the object at the JSON
// Pointer parent and how many members have that name (0: none, or parent names no object);
// unique is false when an object on the way to parent has the key it passes through more than
// once. It answers from parent's split where a lookup made one, else — only when read is set,
// otherwise ok is false — by one walk of parent (Find), cheaper than splitting it when few
// members are asked for, and keeps that answer: asking again reads nothing.
func (x *Index) Member(parent, key string, read bool) (value []byte, count int, unique, ok bool) {
	if c, split := x.containers[parent]; split {
		if c == nil || c.isArray {
			return nil, 0, c != nil && !c.viaDup, true
		}
		m := c.members[key]
		return m.value, m.count, !c.viaDup, true
	}
	if p, ok := x.probed(parent, key); ok {
		return p.value, int(p.count), p.unique, true
	}
	if !read {
		return nil, 0, false, false
	}
	v, unique, found := x.lookup(parent)
	if !found || len(v) == 0 || v[0] != '{' {
		return nil, 0, unique, true // no object: nothing to keep
	}
	m, count, _ := Find(v, key)
	x.note(probe{parent: parent, key: key, value: m.Value, count: int32(min(count, 1<<30)), unique: unique})
	return m.Value, count, unique, true
}

// Known is LookupUnique where it splits nothing and walks nothing: known is false where the
// answer needs an object or array that no lookup split (Hold's values and Member's answers
// count as read).
func (x *Index) Known(pointer string) (value []byte, ok, known bool) {
	value, unique, ok, known := x.find(pointer, false)
	return value, ok && unique, known
}

// Lookup returns the trimmed value at the JSON Pointer pointer ("" is the whole document; else
// "/"-separated reference tokens, "~1" for "/" and "~0" for "~"), through an object by the last
// member of that key, through an array by a decimal index without leading zeros. ok is false
// when the pointer is malformed or names nothing — what Lookup answers for the same tokens.
func (x *Index) Lookup(pointer string) (value []byte, ok bool) {
	value, _, ok = x.lookup(pointer)
	return value, ok
}

// LookupUnique is Lookup that also fails (ok false) when an object on the way, or the one that
// holds the value, has the key more than once: where readers of the document may disagree on
// which member counts.
func (x *Index) LookupUnique(pointer string) (value []byte, ok bool) {
	value, unique, ok := x.lookup(pointer)
	return value, ok && unique
}

func (x *Index) lookup(pointer string) (value []byte, unique, ok bool) {
	value, unique, ok, _ = x.find(pointer, true)
	return value, unique, ok
}

// find is lookup; where split is false it splits nothing, and known is false where the answer
// needs a split that no lookup made (nor Hold nor Member's walk).
func (x *Index) find(pointer string, split bool) (value []byte, unique, ok, known bool) {
	if pointer == "" {
		return x.doc, true, len(x.doc) > 0, true
	}
	if pointer[0] != '/' {
		return nil, false, false, true
	}
	cut := strings.LastIndexByte(pointer, '/')
	if len(x.probes) > 0 {
		if tok, ok := UnescapeToken(pointer[cut+1:]); ok {
			if p, ok := x.probed(pointer[:cut], tok); ok { // what a split of the parent answers
				return p.value, p.unique && p.count == 1, p.count > 0, true
			}
		}
	}
	parent, ok, known := x.container(pointer[:cut], split)
	if !known {
		return nil, false, false, false
	}
	if !ok {
		return nil, false, false, true
	}
	tok, ok := UnescapeToken(pointer[cut+1:])
	if !ok {
		return nil, false, false, true
	}
	if parent.isArray {
		i, isIndex := ArrayIndex(tok)
		if !isIndex || i >= len(parent.elements) {
			return nil, false, false, true
		}
		return parent.elements[i], !parent.viaDup, true, true
	}
	m, found := parent.members[tok]
	if !found {
		return nil, false, false, true
	}
	return m.value, !parent.viaDup && m.count == 1, true, true
}

// container returns the object or array at pointer, split (where split is false: known false
// when no lookup split it); ok is false when there is none.
func (x *Index) container(pointer string, split bool) (_ *container, ok, known bool) {
	if c, seen := x.containers[pointer]; seen {
		return c, c != nil, true
	}
	if !split {
		return nil, false, false
	}
	v, unique, ok := x.lookup(pointer)
	var c *container
	switch {
	case !ok || len(v) == 0:
	case v[0] == '{':
		ms, _ := Members(v)
		c = &container{members: make(map[string]indexed, len(ms)), viaDup: !unique}
		for _, m := range ms {
			c.members[m.Key] = indexed{value: m.Value, count: c.members[m.Key].count + 1}
		}
	case v[0] == '[':
		els, _ := Elements(v)
		c = &container{elements: els, isArray: true, viaDup: !unique}
	}
	x.containers[pointer] = c
	return c, c != nil, true
}

// AppendToken appends tok to b as one reference token of a JSON Pointer, escaped as RFC 6901
// says ("~" as "~0", "/" as "~1"): UnescapeToken's inverse.
func AppendToken(b []byte, tok string) []byte {
	if !strings.ContainsAny(tok, "~/") {
		return append(b, tok...)
	}
	for i := range len(tok) {
		switch tok[i] {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, tok[i])
		}
	}
	return b
}

// Join returns the JSON Pointer prefix (itself a pointer) followed by the reference token tok
// (escaped: AppendToken), in one allocation.
func Join(prefix, tok string) string {
	b := AppendToken(append(append(make([]byte, 0, len(prefix)+1+2*len(tok)), prefix...), '/'), tok)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not written again
}

// Pointer returns the JSON Pointer of the reference tokens (each escaped: AppendToken).
func Pointer(tokens []string) string {
	var b []byte
	for _, t := range tokens {
		b = AppendToken(append(b, '/'), t)
	}
	return string(b)
}

// UnescapeToken undoes RFC 6901's escapes in one reference token of a JSON Pointer, left to
// right ("~1" is "/", "~0" is "~": "~01" is "~1"); ok is false for a "~" not followed by "0" or
// "1".
func UnescapeToken(tok string) (string, bool) {
	if !strings.Contains(tok, "~") {
		return tok, true
	}
	var b strings.Builder
	b.Grow(len(tok) - 1) // one allocation: an escape is two bytes for one
	for i := 0; i < len(tok); i++ {
		if tok[i] != '~' {
			b.WriteByte(tok[i])
			continue
		}
		if i+1 >= len(tok) || tok[i+1] != '0' && tok[i+1] != '1' {
			return "", false
		}
		if tok[i+1] == '0' {
			b.WriteByte('~')
		} else {
			b.WriteByte('/')
		}
		i++
	}
	return b.String(), true
}
