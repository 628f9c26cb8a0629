// Package answer encodes the hooked object the way vcluster reads a plugin's answer: decoded
// with encoding/json's Unmarshal INTO the object it encoded as the request, which merges (it
// keeps map keys the answer lacks, struct fields the answer lacks, ignores null for strings,
// numbers, bools and structs, decodes array elements into the existing ones, reuses the
// target of a non-nil pointer). See internal/bridge's package documentation for the rules and
// the tests that prove them.
//
// Of encodes an edited jsondoc.Doc — the request's object with the chain's edits — along the
// Go type of the kind: values no edit touched are copied as the request's bytes, and only at
// the edited members does it emit the values that reset or zero what the merging decoder would
// keep (set, zeroing). For answers the same as the whole-document walk this package used
// before (kept as the oracle of its tests) without decoding the whole object twice.
package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonfield"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// For returns the answer for the request object request and the hooked object hooked, where obj
// is any value of the Go type vcluster decodes into (e.g. &corev1.Pod{}; only its type is used):
// Of the request's Doc with the patch from request to hooked applied. For types that decode
// themselves (json.Unmarshaler, e.g. *unstructured.Unstructured) and for a nil obj the answer
// is hooked itself. The answer may repeat an object key; encoding/json and sigs.k8s.io/json
// decode repeated keys in order, so a fresh decode gives hooked too.
//
// Errors: request or hooked is not valid JSON, or hooked is not a JSON object.
func For(obj any, request, hooked []byte) ([]byte, error) {
	t := structType(reflect.TypeOf(obj))
	if t == nil {
		if !json.Valid(hooked) {
			return nil, fmt.Errorf("hooked object is not valid JSON")
		}
		return hooked, nil
	}
	if h := bytes.TrimSpace(hooked); len(h) == 0 || h[0] != '{' {
		return nil, fmt.Errorf("hooked object is not a JSON object")
	}
	ops, err := patch.Diff(request, hooked)
	if err != nil {
		return nil, err
	}
	doc := jsondoc.New(request)
	if err := doc.ApplyOps(ops); err != nil {
		return nil, fmt.Errorf("apply the hooks' patch: %w", err)
	}
	return Of(t, doc)
}

// structType returns the struct type behind t (pointers followed) that the answer is encoded
// along, nil when t is none or decodes itself: then the answer is the hooked object itself.
func structType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || decodesItself(t) {
		// Only a struct merges; a type that decodes itself replaces its content, and a
		// top-level map or slice cannot be reset by a document that is one value.
		return nil
	}
	return t
}

// Of returns the answer for the object of Go type t (any type: pointers are followed; a type
// that is no struct, or decodes itself, gets the edited document itself) that doc holds with
// its edits: decoded with encoding/json INTO the object the original document encodes, and
// also into a new object, it gives exactly the edited document. Unedited values are the
// original bytes. Errors: a value that does not decode or encode as JSON.
func Of(t reflect.Type, doc *jsondoc.Doc) ([]byte, error) {
	root := doc.Root()
	t = structType(t)
	if t == nil || !root.Changed {
		return doc.Bytes()
	}
	b := make([]byte, 0, len(root.Raw)+len(root.Raw)/8)
	if object, _ := root.IsSplit(); object {
		return appendStruct(b, t, root)
	}
	// the whole document replaced: the rules on the whole of both
	before, err := jsondoc.Decode(root.Orig)
	if err != nil {
		return nil, fmt.Errorf("decode request object: %w", err)
	}
	after, err := root.Decoded()
	if err != nil {
		return nil, err
	}
	beforeObj, _ := before.(map[string]any)
	afterObj, ok := after.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("hooked object is %T, want a JSON object", after)
	}
	return appendValue(b, structObject(t, beforeObj, afterObj))
}

// appendStruct appends the answer for the split object n (edited) that decodes into a struct of
// type t which holds n's original: the members that zero the removed fields, then n's members
// (unedited ones as they were).
func appendStruct(b []byte, t reflect.Type, n *jsondoc.Node) ([]byte, error) {
	fields := jsonFields(t)
	b = append(b, '{')
	first := true
	emit := func(key string, v any) error {
		b, first = appendKey(b, first, key)
		var err error
		b, err = appendValue(b, v)
		return err
	}
	for _, r := range n.Removed {
		before, err := jsondoc.Decode(r.Node.Orig)
		if err != nil {
			return nil, err
		}
		for _, v := range zeroing(fields.lookup(r.Key), before) {
			if err := emit(r.Key, v); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range n.Members {
		var err error
		if b, first, err = appendMember(b, first, m.Key, fields.lookup(m.Key), m.Node); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendMember appends, after a comma unless first, the members under key that make a field of
// type ft (nil: no field) hold what the node c holds: set's rules, read off c's bytes where they
// need no decoding (a map that lost no key, a slice, a scalar, a new pointer), else decoded.
func appendMember(b []byte, first bool, key string, ft reflect.Type, c *jsondoc.Node) ([]byte, bool, error) {
	put := func(v []byte) {
		b, first = appendKey(b, first, key)
		b = append(b, v...)
	}
	if !c.Changed || ft == nil { // as it was, or a key the decoder ignores
		v, err := c.Append(nil)
		if err != nil {
			return nil, first, err
		}
		put(v)
		return b, first, nil
	}
	if st, ok := reusedStruct(ft, c); ok { // the decoder decodes into the struct it holds
		b, first = appendKey(b, first, key)
		var err error
		b, err = appendStruct(b, st, c)
		return b, first, err
	}
	if v, ok := plainSet(ft, c); ok {
		after, err := c.Append(nil)
		if err != nil {
			return nil, first, err
		}
		for _, x := range v {
			if x == nil {
				put(after)
			} else {
				put(x)
			}
		}
		return b, first, nil
	}
	after, err := c.Decoded()
	if err != nil {
		return nil, first, err
	}
	var before any
	had := c.Orig != nil
	if had {
		if before, err = jsondoc.Decode(c.Orig); err != nil {
			return nil, first, err
		}
	}
	for _, v := range set(ft, before, had, after) {
		enc, err := appendValue(nil, v)
		if err != nil {
			return nil, first, err
		}
		put(enc)
	}
	return b, first, nil
}

// appendKey appends, after a comma unless first, the member name key and its colon.
func appendKey(b []byte, first bool, key string) ([]byte, bool) {
	if !first {
		b = append(b, ',')
	}
	b = jsonscan.AppendString(b, key)
	return append(b, ':'), false
}

// null is the JSON literal null.
var null = []byte("null")

// plainSet is set for the cases it can answer from the node's bytes alone: the values to emit
// in order, nil standing for c's own encoding; false when set needs the decoded values.
func plainSet(t reflect.Type, c *jsondoc.Node) ([][]byte, bool) {
	object, _ := c.IsSplit()
	isNull := c.IsSet && c.Value == nil
	switch {
	case t.Kind() == reflect.Pointer || t == intOrString || t.Kind() == reflect.Struct || t.Kind() == reflect.Array:
		return nil, false
	case decodesItself(t), t.Kind() == reflect.Interface:
		return [][]byte{nil}, true // replaced as a whole
	case t.Kind() == reflect.Map:
		switch {
		case isNull:
			return [][]byte{null}, true
		case object && len(c.Removed) == 0: // no key lost: the decoder adds and replaces
			return [][]byte{nil}, true
		case object:
			return [][]byte{null, nil}, true
		}
		return nil, false
	case t.Kind() == reflect.Slice:
		if isNull {
			return [][]byte{null}, true
		}
		return [][]byte{null, nil}, true // every element decoded fresh
	}
	return [][]byte{nil}, true // string, bool, number: replaced
}

// reusedStruct returns the struct type that a merging decoder decodes the split object c into
// in place — a struct field, or a pointer to a struct that the original set — when the rules
// for it are the rules of its fields one by one.
func reusedStruct(t reflect.Type, c *jsondoc.Node) (reflect.Type, bool) {
	if object, _ := c.IsSplit(); !object {
		return nil, false
	}
	pointer := false
	for t.Kind() == reflect.Pointer {
		t, pointer = t.Elem(), true
	}
	if t.Kind() != reflect.Struct || t == intOrString || decodesItself(t) {
		return nil, false
	}
	if pointer && (c.Orig == nil || string(c.Orig) == "null") {
		return nil, false // a new pointer: a fresh decode
	}
	return t, true
}

// member is one key of an emitted object with the values to emit for it, in order: more than
// one value means the key is repeated, and the decoder applies them one after the other.
type member struct {
	key    string
	values []any
}

// object is a JSON object that may repeat keys, written in the order of its members.
type object []member

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	intOrString     = reflect.TypeFor[intstr.IntOrString]()
)

// decodesItself reports whether encoding/json hands the whole JSON value to the type's own
// UnmarshalJSON (metav1.Time, resource.Quantity, intstr.IntOrString, Unstructured, …).
func decodesItself(t reflect.Type) bool {
	if d, ok := selfDecoding.Load(t); ok {
		return d.(bool)
	}
	d := t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler)
	selfDecoding.Store(t, d)
	return d
}

// selfDecoding holds decodesItself's answers: reflect.Type → bool.
var selfDecoding sync.Map

// set returns the values to emit, in order, under one key so that a Go value of type t that
// holds the decoding of before (present or not: hadBefore) ends up holding the decoding of
// after, when encoding/json decodes them into it one after the other. t is nil for a key that
// is no field of the type (the decoder ignores it).
func set(t reflect.Type, before any, hadBefore bool, after any) []any {
	if t == nil || (hadBefore && reflect.DeepEqual(before, after)) {
		return []any{after} // ignored, or decoding an equal value into an equal value
	}
	switch {
	case t.Kind() == reflect.Pointer:
		if after == nil {
			return []any{nil} // null sets a pointer to nil
		}
		if !hadBefore || before == nil {
			return []any{after} // a nil pointer gets a fresh value: a fresh decode
		}
		return set(t.Elem(), before, true, after) // the decoder reuses the pointee
	case t == intOrString:
		// UnmarshalJSON sets Type and one member and leaves the other: zero it first.
		if after == nil {
			return zeroing(t, before)
		}
		if _, isString := after.(string); isString {
			return []any{json.Number("0"), after}
		}
		return []any{"", after}
	case decodesItself(t), t.Kind() == reflect.Interface:
		return []any{after} // replaced as a whole
	}
	switch t.Kind() {
	case reflect.Map:
		// The decoder keeps the keys of an existing map: reset it to nil when a key went away.
		// Map values are decoded fresh, so nothing below needs care.
		if after == nil {
			return []any{nil}
		}
		if lost(before, after) {
			return []any{nil, after}
		}
		return []any{after}
	case reflect.Slice:
		// The decoder decodes array elements INTO the existing elements, even into stale ones
		// between length and capacity: reset the slice to nil so that every element is fresh.
		if after == nil {
			return []any{nil}
		}
		return []any{nil, after}
	case reflect.Array:
		return []any{[]any{}, after} // [] zeroes every element of a Go array
	case reflect.Struct:
		afterObj, ok := after.(map[string]any)
		if !ok {
			if after == nil {
				return zeroing(t, before) // a fresh decode of null leaves the zero struct
			}
			return []any{after} // not an object: the decoder reports the error
		}
		beforeObj, _ := before.(map[string]any)
		return []any{structObject(t, beforeObj, afterObj)}
	default:
		return []any{after} // string, bool, number: replaced
	}
}

// structObject returns the members that turn a struct holding before into one holding after:
// each key of after with its values, and each key of before that after lacks with the values
// that zero its field.
func structObject(t reflect.Type, before, after map[string]any) object {
	fields := jsonFields(t)
	keys := make([]string, 0, len(after)+len(before))
	for k := range after {
		keys = append(keys, k)
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make(object, 0, len(keys))
	for _, k := range keys {
		ft := fields.lookup(k)
		if v, ok := after[k]; ok {
			old, had := before[k]
			out = append(out, member{k, set(ft, old, had, v)})
		} else {
			out = append(out, member{k, zeroing(ft, before[k])})
		}
	}
	return out
}

// zeroing returns the values that make a field of type t that holds the decoding of before hold
// its zero value, which is what a fresh decode leaves for an absent key.
func zeroing(t reflect.Type, before any) []any {
	if t == nil {
		return []any{nil}
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return []any{nil}
	}
	if t == intOrString {
		return []any{"", json.Number("0")} // Type Int, IntVal 0, StrVal "": the zero value
	}
	if decodesItself(t) {
		return []any{nil} // by convention UnmarshalJSON(null) zeroes (Time, Quantity, …)
	}
	switch t.Kind() {
	case reflect.String:
		return []any{""} // null has no effect on a string: only "" zeroes it
	case reflect.Bool:
		return []any{false}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return []any{json.Number("0")}
	case reflect.Array:
		return []any{[]any{}}
	case reflect.Struct:
		// null has no effect on a struct: zero every field the request had (the others are
		// zero already, as a non-zero field is always encoded).
		beforeObj, _ := before.(map[string]any)
		fields := jsonFields(t)
		keys := make([]string, 0, len(beforeObj))
		for k := range beforeObj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make(object, 0, len(keys))
		for _, k := range keys {
			out = append(out, member{k, zeroing(fields.lookup(k), beforeObj[k])})
		}
		return []any{out}
	default:
		return []any{nil}
	}
}

// lost reports whether before is an object with a key that after lacks.
func lost(before, after any) bool {
	b, ok := before.(map[string]any)
	if !ok {
		return false
	}
	a, _ := after.(map[string]any)
	for k := range b {
		if _, ok := a[k]; !ok {
			return true
		}
	}
	return false
}

// fieldTypes maps JSON object keys to the Go types of the struct fields they decode into.
type fieldTypes map[string]reflect.Type

// lookup returns the type of the field key decodes into, matching names as encoding/json does
// (exact first, then case-insensitive), or nil when key is no field.
func (f fieldTypes) lookup(key string) reflect.Type {
	if t, ok := f[key]; ok {
		return t
	}
	for name, t := range f {
		if strings.EqualFold(name, key) {
			return t
		}
	}
	return nil
}

// jsonFields returns the JSON names of struct type t's fields with their types, as
// encoding/json names them (jsonfield.Of), once per type.
func jsonFields(t reflect.Type) fieldTypes {
	if f, ok := fieldCache.Load(t); ok {
		return f.(fieldTypes)
	}
	fields := fieldTypes{}
	for _, f := range jsonfield.Of(t) {
		fields[f.Name] = f.Type
	}
	fieldCache.Store(t, fields)
	return fields
}

// fieldCache holds jsonFields' answers: reflect.Type → fieldTypes (read only once stored).
var fieldCache sync.Map

// appendValue appends the encoding of v: an object with its repeated keys in order, anything
// else with encoding/json (maps with sorted keys).
func appendValue(b []byte, v any) ([]byte, error) {
	obj, ok := v.(object)
	if !ok {
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return append(b, enc...), nil
	}
	b = append(b, '{')
	first := true
	for _, m := range obj {
		for _, value := range m.values {
			b, first = appendKey(b, first, m.key)
			var err error
			if b, err = appendValue(b, value); err != nil {
				return nil, err
			}
		}
	}
	return append(b, '}'), nil
}
