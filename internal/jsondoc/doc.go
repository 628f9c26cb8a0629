// Package jsondoc is the one representation of a request's object that its stages edit: the
// object's JSON bytes, split into members and elements only along the paths a stage reads or
// edits, every other value left as the bytes it was. Edits are recorded as the RFC 6902
// operations that make them (Ops), the edited object is encoded by copying the untouched bytes
// (Bytes), and package answer encodes it for a merging decoder from the same tree.
//
// A Doc is what undo.Apply edits on a read (it implements undo.Doc with the semantics of the
// test model undo's FuzzDocEdits holds it to: the decoded tree, edited as a JSON Patch does)
// and what a patch is applied to (ApplyOps), so neither decodes the whole object into a map
// tree nor encodes it again.
package jsondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// Doc is a JSON document being edited. Create it with New; it is not safe for concurrent use.
type Doc struct {
	root *Node
	ops  []patch.Operation
}

// Node is one value of a Doc. Exactly one of its forms holds: Raw (untouched or only read),
// split into Members (an object) or Elements (an array), or Value (set by an edit, decoded JSON
// as encoding/json decodes into any, numbers as json.Number).
type Node struct {
	// Raw is the value's bytes: the original while the node is not Set.
	Raw []byte
	// Orig is the bytes the value had in the original document, nil for a value that an edit
	// added (package answer decodes it to zero or reset what a merging decoder keeps).
	Orig []byte
	// Members of a split object, in order; Removed are members of the original object that
	// edits removed (their Orig kept, never nil): a member that an edit added and another
	// removed again is in neither.
	Members []Member
	Removed []Member
	// Elements of a split array, in order.
	Elements []*Node
	// Value is the value an edit set, when IsSet.
	Value any
	IsSet bool
	// Changed says an edit changed this value or one inside it.
	Changed bool

	split, isArray bool
}

// Member is one member of a split object.
type Member struct {
	Key  string
	Node *Node
}

// New returns a Doc of the JSON document raw (valid JSON; leading and trailing white space
// ignored). raw is read, never changed.
func New(raw []byte) *Doc {
	raw = bytes.TrimSpace(raw)
	return &Doc{root: &Node{Raw: raw, Orig: raw}}
}

// NewOf is New for an object raw whose top-level members a scan read already: top, in
// document order, each key once, each value trimmed and a sub-slice of raw (as jsonscan.Members
// gives them). The root starts split into them, as the first reader would split it, so none
// walks raw's top level again. With no members, more than 16, or a key twice (the root is then
// decoded, not split: splitNode), it is New.
func NewOf(raw []byte, top []jsonscan.Member) *Doc {
	d := New(raw)
	if len(top) == 0 || len(top) > 16 {
		return d
	}
	for i := range top {
		for j := range i {
			if top[j].Key == top[i].Key {
				return d
			}
		}
	}
	root := d.root
	root.Members = make([]Member, len(top))
	for i, m := range top {
		root.Members[i] = Member{Key: m.Key, Node: &Node{Raw: m.Value, Orig: m.Value}}
	}
	root.split = true
	return d
}

// Root returns the document's root value.
func (d *Doc) Root() *Node { return d.root }

// Ops returns the operations of the edits made so far, in order: applied to the original
// document they give Bytes.
func (d *Doc) Ops() []patch.Operation { return d.ops }

// Changed reports whether an edit changed the document.
func (d *Doc) Changed() bool { return d.root.Changed }

// errDuplicate is why an object with a repeated key is decoded rather than split.
var errDuplicate = errors.New("repeated key")

// splitNode splits n (not set) into members or elements, once. An object with a key more than
// once is decoded instead (the last member wins, as in encoding/json), so that every reader
// sees one value per key. It reports false when n is neither an object nor an array.
func splitNode(n *Node) (bool, error) {
	if n.IsSet {
		return false, nil
	}
	if n.split {
		return true, nil
	}
	switch {
	case len(n.Raw) > 0 && n.Raw[0] == '{':
		ms, ok := jsonscan.Members(n.Raw)
		if !ok {
			return false, fmt.Errorf("malformed object")
		}
		seen := make(map[string]bool, len(ms))
		for _, m := range ms {
			if seen[m.Key] {
				return false, errDuplicate
			}
			seen[m.Key] = true
		}
		n.Members = make([]Member, len(ms))
		for i, m := range ms {
			n.Members[i] = Member{Key: m.Key, Node: &Node{Raw: m.Value, Orig: m.Value}}
		}
		n.split = true
		return true, nil
	case len(n.Raw) > 0 && n.Raw[0] == '[':
		els, ok := jsonscan.Elements(n.Raw)
		if !ok {
			return false, fmt.Errorf("malformed array")
		}
		n.Elements = make([]*Node, len(els))
		for i, e := range els {
			n.Elements[i] = &Node{Raw: e, Orig: e}
		}
		n.split, n.isArray = true, true
		return true, nil
	}
	return false, nil
}

// asValue turns n into a set node holding its decoded value (its Orig kept).
func asValue(n *Node) error {
	if n.IsSet {
		return nil
	}
	v, err := Decode(n.encoded())
	if err != nil {
		return err
	}
	*n = Node{Orig: n.Orig, Value: v, IsSet: true, Changed: n.Changed}
	return nil
}

// child returns the child of n at tok, splitting n first; nil when there is none. A node
// that cannot be split (a repeated key) becomes a set value, whose children are not nodes:
// then ok is false and n.IsSet true.
func child(n *Node, tok string) (c *Node, found bool, err error) {
	ok, err := splitNode(n)
	if errors.Is(err, errDuplicate) {
		return nil, false, asValue(n)
	}
	if err != nil || !ok {
		return nil, false, err
	}
	if n.isArray {
		i, ok := arrayIndex(tok, len(n.Elements))
		if !ok || i == len(n.Elements) {
			return nil, false, nil
		}
		return n.Elements[i], true, nil
	}
	for _, m := range n.Members {
		if m.Key == tok {
			return m.Node, true, nil
		}
	}
	return nil, false, nil
}

// walk returns the node at tokens, or, where a set value holds the rest of the path, that node
// and the tokens left inside its value. nil when there is nothing at tokens.
func (d *Doc) walk(tokens []string, mark bool) (n *Node, rest []string, err error) {
	n = d.root
	for i, tok := range tokens {
		if mark {
			n.Changed = true
		}
		if n.IsSet {
			return n, tokens[i:], nil
		}
		c, found, err := child(n, tok)
		if err != nil {
			return nil, nil, err
		}
		if n.IsSet { // just decoded: a repeated key
			return n, tokens[i:], nil
		}
		if !found {
			return nil, nil, nil
		}
		n = c
	}
	if mark {
		n.Changed = true
	}
	return n, nil, nil
}

// Lookup returns the decoded value at the reference tokens (undo.Doc).
func (d *Doc) Lookup(tokens []string) (any, bool) {
	n, rest, err := d.walk(tokens, false)
	if err != nil || n == nil {
		return nil, false
	}
	if n.IsSet {
		return LookupValue(n.Value, rest)
	}
	v, err := n.Decoded()
	return v, err == nil
}

// Kind returns the first byte of the JSON value at tokens as the document holds it now ('{',
// '[', '"', 'n', 't', 'f' or a digit or '-'), without decoding it; false when there is none.
func (d *Doc) Kind(tokens []string) (byte, bool) {
	n, rest, err := d.walk(tokens, false)
	if err != nil || n == nil {
		return 0, false
	}
	if n.IsSet {
		v, ok := LookupValue(n.Value, rest)
		if !ok {
			return 0, false
		}
		switch v.(type) {
		case map[string]any:
			return '{', true
		case []any:
			return '[', true
		case string:
			return '"', true
		case nil:
			return 'n', true
		case bool:
			return 't', true
		}
		return '0', true
	}
	if object, array := n.IsSplit(); object || array {
		if array {
			return '[', true
		}
		return '{', true
	}
	if len(n.Raw) == 0 {
		return 0, false
	}
	return n.Raw[0], true
}

// Len returns the number of elements of the array at tokens as the document holds it now,
// false where the value there is not an array (or there is none).
func (d *Doc) Len(tokens []string) (int, bool) {
	n, rest, err := d.walk(tokens, false)
	if err != nil || n == nil {
		return 0, false
	}
	if n.IsSet {
		v, _ := LookupValue(n.Value, rest)
		a, ok := v.([]any)
		return len(a), ok
	}
	if ok, err := splitNode(n); err != nil || !ok || !n.isArray {
		return 0, false
	}
	return len(n.Elements), true
}

// IsArrayIndex reports whether tokens address an index (0..len) of an array (undo.Doc).
func (d *Doc) IsArrayIndex(tokens []string) bool {
	if len(tokens) == 0 {
		return false
	}
	last := tokens[len(tokens)-1]
	if last == "-" {
		return false
	}
	n, rest, err := d.walk(tokens[:len(tokens)-1], false)
	if err != nil || n == nil {
		return false
	}
	if n.IsSet {
		parent, ok := LookupValue(n.Value, rest)
		a, isArray := parent.([]any)
		if !ok || !isArray {
			return false
		}
		_, ok = arrayIndex(last, len(a))
		return ok
	}
	if ok, err := splitNode(n); err != nil || !ok || !n.isArray {
		return false
	}
	_, ok := arrayIndex(last, len(n.Elements))
	return ok
}

// Set sets the value at tokens as RFC 6902's add does (a member is set, an array index
// inserts, "-" appends) and records the operation; false when the parent does not exist
// (undo.Doc). v must be decoded JSON (what Lookup returns), never changed afterwards.
func (d *Doc) Set(tokens []string, v any) (bool, error) {
	return d.edit(tokens, v, false)
}

// Remove removes the value at tokens and records the operation; false when there is none
// (undo.Doc).
func (d *Doc) Remove(tokens []string) bool {
	ok, _ := d.edit(tokens, nil, true)
	return ok
}

// edit is Set (remove false) and Remove.
func (d *Doc) edit(tokens []string, v any, remove bool) (bool, error) {
	if len(tokens) == 0 {
		return false, nil
	}
	last := tokens[len(tokens)-1]
	if !d.canEdit(tokens, remove) {
		return false, nil
	}
	parent, rest, err := d.walk(tokens[:len(tokens)-1], true)
	if err != nil || parent == nil {
		return false, nil // canEdit found the parent: cannot happen
	}
	if parent.IsSet { // inside a set value: edit it as the decoded value
		var done bool
		if parent.Value, done = editValue(parent.Value, append(slices.Clip(rest), last), v, remove); !done {
			return false, nil
		}
	} else if parent.isArray {
		i, _ := arrayIndex(last, len(parent.Elements))
		if remove {
			parent.Elements = slices.Delete(parent.Elements, i, i+1)
		} else {
			parent.Elements = slices.Insert(parent.Elements, i, &Node{Value: v, IsSet: true, Changed: true})
		}
	} else {
		at := slices.IndexFunc(parent.Members, func(m Member) bool { return m.Key == last })
		switch {
		case remove:
			if parent.Members[at].Node.Orig != nil { // a member an edit added was never the original's
				parent.Removed = append(parent.Removed, parent.Members[at])
			}
			parent.Members = slices.Delete(parent.Members, at, at+1)
		case at >= 0:
			old := parent.Members[at].Node
			parent.Members[at].Node = &Node{Orig: old.Orig, Value: v, IsSet: true, Changed: true}
		default:
			orig := []byte(nil)
			if r := slices.IndexFunc(parent.Removed, func(m Member) bool { return m.Key == last }); r >= 0 {
				orig = parent.Removed[r].Node.Orig // removed, then set again: a replacement
				parent.Removed = slices.Delete(parent.Removed, r, r+1)
			}
			parent.Members = append(parent.Members, Member{Key: last, Node: &Node{Orig: orig, Value: v, IsSet: true, Changed: true}})
		}
	}
	op := patch.Operation{Operation: "add", Path: jsonscan.Pointer(tokens)}
	if remove {
		op.Operation = "remove"
	} else {
		op.Value = v
	}
	d.ops = append(d.ops, op)
	return true, nil
}

// canEdit reports whether the edit applies: the parent exists and, for an array, the index
// suits it (an index of an element to remove, 0..len or "-" to insert); for a removal from an
// object, the member exists.
func (d *Doc) canEdit(tokens []string, remove bool) bool {
	last := tokens[len(tokens)-1]
	parent, rest, err := d.walk(tokens[:len(tokens)-1], false)
	if err != nil || parent == nil {
		return false
	}
	if parent.IsSet {
		pv, ok := LookupValue(parent.Value, rest)
		switch p := pv.(type) {
		case map[string]any:
			_, has := p[last]
			return ok && (!remove || has)
		case []any:
			i, isIndex := arrayIndex(last, len(p))
			return ok && isIndex && (!remove || i < len(p))
		}
		return false
	}
	if ok, err := splitNode(parent); errors.Is(err, errDuplicate) {
		if asValue(parent) != nil {
			return false
		}
		return d.canEdit(tokens, remove)
	} else if err != nil || !ok {
		return false
	}
	if parent.isArray {
		i, isIndex := arrayIndex(last, len(parent.Elements))
		return isIndex && (!remove || i < len(parent.Elements))
	}
	return !remove || slices.ContainsFunc(parent.Members, func(m Member) bool { return m.Key == last })
}

// editValue edits the decoded value root at tokens as a JSON Patch edits the decoded value and returns the new root.
func editValue(root any, tokens []string, v any, remove bool) (any, bool) {
	if len(tokens) == 0 {
		return root, false
	}
	tok := tokens[0]
	switch node := root.(type) {
	case map[string]any:
		if len(tokens) == 1 {
			if remove {
				_, ok := node[tok]
				delete(node, tok)
				return node, ok
			}
			node[tok] = v
			return node, true
		}
		c, ok := node[tok]
		if !ok {
			return root, false
		}
		nc, done := editValue(c, tokens[1:], v, remove)
		if done {
			node[tok] = nc
		}
		return node, done
	case []any:
		i, ok := arrayIndex(tok, len(node))
		if !ok {
			return root, false
		}
		if len(tokens) == 1 {
			if remove {
				if i >= len(node) {
					return root, false
				}
				return slices.Delete(node, i, i+1), true
			}
			return slices.Insert(node, i, v), true
		}
		if i == len(node) {
			return root, false
		}
		nc, done := editValue(node[i], tokens[1:], v, remove)
		if done {
			node[i] = nc
		}
		return node, done
	}
	return root, false
}

// LookupValue returns the value at the reference tokens inside v, decoded JSON (what Decode
// gives, or encoding/json into any): through objects by key, through arrays by RFC 6901 index;
// false where there is none.
func LookupValue(v any, tokens []string) (any, bool) {
	for _, tok := range tokens {
		switch node := v.(type) {
		case map[string]any:
			c, ok := node[tok]
			if !ok {
				return nil, false
			}
			v = c
		case []any:
			i, ok := arrayIndex(tok, len(node))
			if !ok || i == len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// Bytes returns the edited document: the original bytes where nothing changed.
func (d *Doc) Bytes() ([]byte, error) {
	if !d.root.Changed {
		return d.root.Raw, nil
	}
	out := make([]byte, 0, len(d.root.Raw)+256)
	return d.root.Append(out)
}

// Append appends the JSON of n (as edited) to b.
func (n *Node) Append(b []byte) ([]byte, error) {
	switch {
	case n.IsSet:
		v, err := json.Marshal(n.Value)
		if err != nil {
			return nil, err
		}
		return append(b, v...), nil
	case !n.Changed || !n.split:
		return append(b, n.Raw...), nil
	case n.isArray:
		b = append(b, '[')
		for i, e := range n.Elements {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = e.Append(b); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	b = append(b, '{')
	for i, m := range n.Members {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonscan.AppendString(b, m.Key)
		b = append(b, ':')
		var err error
		if b, err = m.Node.Append(b); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// encoded returns the JSON of n as edited, for decoding.
func (n *Node) encoded() []byte {
	if !n.Changed {
		return n.Raw
	}
	b, err := n.Append(nil)
	if err != nil {
		return nil
	}
	return b
}

// Decoded returns the value of n as edited, decoded as encoding/json decodes into any
// (numbers as json.Number).
func (n *Node) Decoded() (any, error) {
	if n.IsSet {
		return n.Value, nil
	}
	return Decode(n.encoded())
}

// IsSplit reports whether n is a split object (Members) or array (Elements).
func (n *Node) IsSplit() (object, array bool) {
	return n.split && !n.isArray, n.split && n.isArray
}

// ApplyOps applies the RFC 6902 add, remove and replace operations ops (a patch of the
// document, in order) and records them. A replace is a Set of an existing member, or a Remove
// and a Set of an existing array element. It fails,
// naming the operation, on any other operation, a path that does not apply or a value that
// does not encode; the document is then half-edited and must be dropped.
func (d *Doc) ApplyOps(ops []patch.Operation) error {
	for _, op := range ops {
		tokens, err := patch.ParsePointer(op.Path)
		if err != nil {
			return fmt.Errorf("operation %s %q: %w", op.Operation, op.Path, err)
		}
		var ok bool
		switch {
		case len(tokens) == 0 && (op.Operation == "add" || op.Operation == "replace"): // the whole document
			v, err := decodedValue(op.Value)
			if err != nil {
				return fmt.Errorf("operation %s %q: %w", op.Operation, op.Path, err)
			}
			d.root = &Node{Orig: d.root.Orig, Value: v, IsSet: true, Changed: true}
			d.ops = append(d.ops, patch.Operation{Operation: "add", Path: "", Value: v})
			continue
		}
		switch op.Operation {
		case "remove":
			ok = d.Remove(tokens)
		case "add", "replace":
			if op.Operation == "replace" {
				if _, has := d.Lookup(tokens); !has {
					return fmt.Errorf("operation replace %q: no value there", op.Path)
				}
				if d.IsArrayIndex(tokens) && !d.Remove(tokens) { // an add at an index inserts
					return fmt.Errorf("operation replace %q: the path does not apply", op.Path)
				}
			}
			v, err := decodedValue(op.Value)
			if err != nil {
				return fmt.Errorf("operation %s %q: %w", op.Operation, op.Path, err)
			}
			if ok, err = d.Set(tokens, v); err != nil {
				return fmt.Errorf("operation %s %q: %w", op.Operation, op.Path, err)
			}
		default:
			return fmt.Errorf("operation %s %q: not supported", op.Operation, op.Path)
		}
		if !ok {
			return fmt.Errorf("operation %s %q: the path does not apply", op.Operation, op.Path)
		}
	}
	return nil
}

// decodedValue returns an operation's value as decoded JSON.
func decodedValue(v any) (any, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	return Decode(raw)
}

// Decode decodes one JSON value as encoding/json decodes into any, numbers as json.Number (the
// values a Doc holds); a plain string literal is read without a decoder. Errors: not one JSON
// value.
func Decode(doc []byte) (any, error) {
	if text, plain := jsonscan.PlainText(doc); plain {
		return string(text), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// arrayIndex parses an array reference token for an array of n elements: 0..n ("-" is n; an
// index as jsonscan.ArrayIndex reads it).
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "-" {
		return n, true
	}
	i, ok := jsonscan.ArrayIndex(tok)
	return i, ok && i <= n
}
