package patch

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/synchook/synchook/internal/jsonscan"
)

// Diff returns the RFC 6902 operations that turn the JSON document original into mutated, like
// Create, but in time proportional to what changed rather than to the documents: it walks both
// documents' bytes side by side, skips every member or element whose bytes are equal without
// decoding it, and emits raw JSON values (json.RawMessage) for what differs.
//
// Objects are compared member by member (add, remove, or a recursive diff); arrays without the
// elements they share at the front and at the back, then element by element, adding or removing
// what is left over (an element inserted or removed anywhere is one operation); any other
// difference is a replace of the value. Applying the result to original always yields a
// document equal to mutated (fuzzed in FuzzDiff). Equal documents give nil. Malformed JSON is an
// error.
func Diff(original, mutated []byte) ([]Operation, error) {
	if !json.Valid(original) {
		return nil, errors.New("diff: original is not valid JSON")
	}
	if !json.Valid(mutated) {
		return nil, errors.New("diff: mutated is not valid JSON")
	}
	return diffValid(original, mutated), nil
}

// diffValid is Diff for documents known to be valid JSON (e.g. produced by json.Marshal).
func diffValid(original, mutated []byte) []Operation {
	var d differ
	d.value(nil, bytes.TrimSpace(original), bytes.TrimSpace(mutated))
	return d.ops
}

type differ struct {
	ops []Operation
}

func (d *differ) emit(op string, path []byte, value []byte) {
	o := Operation{Operation: op, Path: string(path)}
	if value != nil {
		o.Value = json.RawMessage(value)
	}
	d.ops = append(d.ops, o)
}

// value diffs two trimmed JSON values found at path.
func (d *differ) value(path []byte, a, b []byte) {
	if bytes.Equal(a, b) {
		return
	}
	switch {
	case a[0] == '{' && b[0] == '{':
		if !d.object(path, a, b) {
			d.emit("replace", path, b)
		}
	case a[0] == '[' && b[0] == '[':
		d.array(path, a, b)
	default:
		d.emit("replace", path, b)
	}
}

// object diffs two objects member by member. It returns false, emitting nothing, when either
// object has a duplicate key (the caller then replaces the whole object).
func (d *differ) object(path []byte, a, b []byte) bool {
	am, _ := jsonscan.Members(a)
	bm, _ := jsonscan.Members(b)
	if hasDuplicates(am) || hasDuplicates(bm) {
		return false
	}
	var bIndex map[string]int
	matched := make([]bool, len(bm))
	for i, m := range am {
		j := -1
		if i < len(bm) && bm[i].Key == m.Key { // json.Marshal keeps keys in the same order
			j = i
		} else {
			if bIndex == nil {
				bIndex = make(map[string]int, len(bm))
				for k, x := range bm {
					bIndex[x.Key] = k
				}
			}
			if k, ok := bIndex[m.Key]; ok {
				j = k
			}
		}
		child := appendToken(path, m.Key)
		if j < 0 {
			d.emit("remove", child, nil)
			continue
		}
		matched[j] = true
		if m.Key == "" && !bytes.Equal(m.Value, bm[j].Value) {
			// evanphx/json-patch, kube-apiserver's applier and ours, cannot address below an
			// empty key ("//0" does not apply, "//-" adds nothing): the value goes whole
			d.emit("replace", child, bm[j].Value)
			continue
		}
		d.value(child, m.Value, bm[j].Value)
	}
	for j, m := range bm {
		if !matched[j] {
			d.emit("add", appendToken(path, m.Key), m.Value)
		}
	}
	return true
}

// array diffs two arrays: the elements both share at the front and at the back are skipped
// (compared by their bytes), and the rest is diffed element by element over its common length,
// then the extra elements of b are added after it or the extra elements of a removed (highest
// first). So one element inserted or removed anywhere in an array of N elements costs O(N)
// time and one operation, never a replace of every shifted element.
func (d *differ) array(path []byte, a, b []byte) {
	ae, _ := jsonscan.Elements(a)
	be, _ := jsonscan.Elements(b)
	n := min(len(ae), len(be))
	front := 0
	for front < n && bytes.Equal(ae[front], be[front]) {
		front++
	}
	back := 0
	for back < n-front && bytes.Equal(ae[len(ae)-1-back], be[len(be)-1-back]) {
		back++
	}
	am, bm := ae[front:len(ae)-back], be[front:len(be)-back]
	common := min(len(am), len(bm))
	for i := range common {
		d.value(appendToken(path, strconv.Itoa(front+i)), am[i], bm[i])
	}
	for i := common; i < len(bm); i++ {
		d.emit("add", appendToken(path, strconv.Itoa(front+i)), bm[i])
	}
	for i := len(am) - 1; i >= common; i-- {
		d.emit("remove", appendToken(path, strconv.Itoa(front+i)), nil)
	}
}

// appendToken returns a new pointer: path + "/" + the escaped token (RFC 6901: ~ → ~0, / → ~1).
func appendToken(path []byte, token string) []byte {
	out := make([]byte, 0, len(path)+1+len(token)+2)
	return jsonscan.AppendToken(append(append(out, path...), '/'), token)
}

func hasDuplicates(ms []jsonscan.Member) bool {
	if len(ms) < 2 {
		return false
	}
	if len(ms) <= 16 {
		for i := range ms {
			for j := i + 1; j < len(ms); j++ {
				if ms[i].Key == ms[j].Key {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(ms))
	for _, m := range ms {
		if _, dup := seen[m.Key]; dup {
			return true
		}
		seen[m.Key] = struct{}{}
	}
	return false
}

// DiffMarshaled is Diff for documents produced by json.Marshal (or otherwise known to be valid
// JSON): it skips the validation. Malformed input gives undefined operations, never a panic
// that escapes — use Diff for untrusted input.
func DiffMarshaled(original, mutated []byte) []Operation {
	return diffValid(original, mutated)
}

// appliesVia reports whether every operation of ops surely applies to a document in order,
// lookup answering for it what a jsonscan.Index's LookupUnique answers: the target of replace
// and remove exists, the parent of add exists (an object, or an array with the index in range
// counting earlier adds to it), and no object on the way has the key twice. It reads the
// document's bytes without decoding them (an Index splits each object or array once). false
// means "not sure", not "does not apply".
func appliesVia(lookup func(pointer string) ([]byte, bool), ops []Operation) bool {
	length := map[string]int{} // of each array added to, counting the adds so far
	for _, op := range ops {
		switch op.Operation {
		case "replace", "remove":
			if _, ok := lookup(op.Path); !ok {
				return false
			}
		case "add":
			cut := strings.LastIndexByte(op.Path, '/')
			if cut < 0 {
				return false
			}
			parentPath, last := op.Path[:cut], op.Path[cut+1:]
			parent, ok := lookup(parentPath)
			if !ok {
				return false
			}
			switch parent[0] {
			case '{':
			case '[':
				n, seen := length[parentPath]
				if !seen {
					n = len(elementsOf(parent))
				}
				idx, err := strconv.Atoi(last)
				if last != "-" && (err != nil || idx < 0 || idx > n) {
					return false
				}
				length[parentPath] = n + 1
			default:
				return false
			}
		default:
			return false
		}
	}
	return true
}

// lookup returns the trimmed value at the JSON Pointer path in doc.
func lookup(doc []byte, path string) ([]byte, bool) {
	return jsonscan.NewIndex(doc).LookupUnique(path)
}

func elementsOf(arr []byte) [][]byte { els, _ := jsonscan.Elements(arr); return els }
