package undo

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/synchook/synchook/internal/jsondoc"
)

// Tree is a JSON document decoded into maps, slices, strings, json.Number, bools and nil
// (DecodeTree): the Doc Apply worked on for a whole object before jsondoc.Doc, kept as the
// oracle of FuzzDocEdits (this package's tests), which holds jsondoc.Doc to it.
type Tree struct {
	V any
}

// DecodeTree decodes the JSON document doc into a Tree, keeping every number as written.
func DecodeTree(doc []byte) (Tree, error) {
	v, err := jsondoc.Decode(doc)
	return Tree{V: v}, err
}

// Lookup returns the value at the reference tokens of a JSON Pointer.
func (t Tree) Lookup(tokens []string) (any, bool) {
	cur := t.V
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

// Set sets the value at tokens as RFC 6902's add does (a member is set, an array index
// inserts, "-" appends); false when the parent does not exist. It never fails.
func (t Tree) Set(tokens []string, v any) (bool, error) {
	return t.editParent(tokens, func(m map[string]any, key string) bool {
		m[key] = v
		return true
	}, func(a []any, i int) ([]any, bool) {
		return slices.Insert(a, i, v), true // the tree is the caller's own: edited in place
	}), nil
}

// Remove removes the value at tokens; false when there is none.
func (t Tree) Remove(tokens []string) bool {
	return t.editParent(tokens, func(m map[string]any, key string) bool {
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

// IsArrayIndex reports whether tokens address an index (0..len) of an array.
func (t Tree) IsArrayIndex(tokens []string) bool {
	if len(tokens) == 0 {
		return false
	}
	parent, ok := t.Lookup(tokens[:len(tokens)-1])
	a, isArray := parent.([]any)
	if !ok || !isArray {
		return false
	}
	last := tokens[len(tokens)-1]
	_, ok = arrayIndex(last, len(a))
	return ok && last != "-"
}

// SetAnnotation sets the annotation key to value, making the annotations map when it is
// absent; false when metadata is not an object.
func (t Tree) SetAnnotation(key, value string) bool {
	meta, _ := t.Lookup([]string{"metadata"})
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

// Identity returns what no undo may change: apiVersion, kind, metadata.name,
// metadata.namespace and metadata.uid as decoded.
func (t Tree) Identity() [5]any {
	get := func(tokens ...string) any { v, _ := t.Lookup(tokens); return v }
	return [5]any{get("apiVersion"), get("kind"), get("metadata", "name"), get("metadata", "namespace"), get("metadata", "uid")}
}

// editParent changes the parent of the value at tokens (not the root): inMap for an object,
// inArray for an array, which returns the new array (arrays are values inside their own
// parent, so it is stored back there) and whether the index suits it. It reports false when
// the parent does not exist or the edit does not apply.
func (t Tree) editParent(tokens []string, inMap func(map[string]any, string) bool, inArray func([]any, int) ([]any, bool)) bool {
	if len(tokens) == 0 {
		return false
	}
	parent, ok := t.Lookup(tokens[:len(tokens)-1])
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
		return ok && t.editParent(tokens[:len(tokens)-1], func(m map[string]any, key string) bool {
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

// Kind implements Doc: the first byte of the value's JSON.
func (t Tree) Kind(tokens []string) (byte, bool) {
	v, ok := t.Lookup(tokens)
	if !ok {
		return 0, false
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) == 0 {
		return 0, false
	}
	return b[0], true
}
