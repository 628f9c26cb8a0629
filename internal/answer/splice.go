package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// Splice returns the answer for the request object raw (valid JSON, as the chain checked it)
// and ops, the patch from raw to the hooked object as the typed compare makes it (moved onto
// raw: patch.RebaseVia, the sealed undo's operation included), for an object of Go type t: the
// same answer as Of(t, raw's Doc with ops applied) — decoded with encoding/json INTO the object
// raw encodes, and into a new one, it gives exactly raw with ops applied — made with only the
// work the change needs. Where every operation adds a member to an object that raw holds (the
// member absent, or holding a scalar) or replaces a scalar by a scalar, at a path raw holds (an
// operation inside what another adds finds no parent there), no two on one value, their values
// are spliced into one copy of raw's bytes: nothing else of raw is decoded or encoded, and
// members raw holds that t does not know stay as they are. Any other patch goes through Of.
// Like Of it matches keys as written: a key that differs from another only in case (which the
// engine's intake refuses) is another member. Errors: an operation that does not apply to raw,
// or a value that does not encode (as Of).
func Splice(t reflect.Type, raw []byte, ops []patch.Operation) ([]byte, error) {
	if len(ops) == 0 {
		return raw, nil
	}
	if out, ok := spliceInto(raw, ops); ok {
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
func spliceInto(raw []byte, ops []patch.Operation) (out []byte, ok bool) {
	edits := make([]spliceEdit, 0, len(ops))
	grow := 0
	for i := range ops {
		e, ok := spliceOf(raw, &ops[i])
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

// spliceOf returns the edit of raw that op makes, when it is one Splice makes by hand.
func spliceOf(raw []byte, op *patch.Operation) (spliceEdit, bool) {
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
