package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Answer returns the JSON to send back as MutateResult.object so that vcluster, which decodes
// it with encoding/json's Unmarshal INTO the object it encoded as request, ends up with exactly
// the object that hooked describes — removed labels, annotations, omitempty fields, pointers and
// slice elements included. See the package documentation for the rules and their proof.
//
// obj is any value of the Go type vcluster decodes into (e.g. &corev1.Pod{}; only its type is
// used). request is the JSON vcluster sent, hooked the JSON of the hooked object. For types
// that decode themselves (json.Unmarshaler, e.g. *unstructured.Unstructured) and for a nil obj
// the answer is hooked itself. The answer may repeat an object key; encoding/json and
// sigs.k8s.io/json decode repeated keys in order, so a fresh decode gives hooked too.
//
// Errors: request or hooked is not valid JSON, or hooked is not a JSON object.
func Answer(obj any, request, hooked []byte) ([]byte, error) {
	t := reflect.TypeOf(obj)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || decodesItself(t) {
		// Only a struct merges; a type that decodes itself replaces its content, and a
		// top-level map or slice cannot be reset by a document that is one value.
		return hooked, nil
	}
	before, err := decodeGeneric(request)
	if err != nil {
		return nil, fmt.Errorf("decode request object: %w", err)
	}
	after, err := decodeGeneric(hooked)
	if err != nil {
		return nil, fmt.Errorf("decode hooked object: %w", err)
	}
	beforeObj, _ := before.(map[string]any)
	afterObj, ok := after.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("hooked object is %T, want a JSON object", after)
	}
	var buf bytes.Buffer
	buf.Grow(len(hooked) + len(hooked)/8)
	if err := write(&buf, structObject(t, beforeObj, afterObj)); err != nil {
		return nil, fmt.Errorf("encode answer: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeGeneric decodes JSON into maps, slices, strings, bools, json.Number and nil; numbers
// keep their text.
func decodeGeneric(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
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
	return t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler)
}

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

// jsonFields returns the JSON names of t's fields with their types, following encoding/json:
// `json:"-"` and unexported fields are skipped, the fields of embedded structs without a JSON
// name (`json:",inline"`) are promoted, and a shallower field wins over a deeper one.
func jsonFields(t reflect.Type) fieldTypes {
	fields := fieldTypes{}
	seen := map[reflect.Type]bool{}
	for level := []reflect.Type{t}; len(level) > 0; {
		var next []reflect.Type
		found := fieldTypes{}
		for _, st := range level {
			if seen[st] {
				continue
			}
			seen[st] = true
			for i := range st.NumField() {
				f := st.Field(i)
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if f.Anonymous && name == "" {
					et := f.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if et.Kind() == reflect.Struct {
						next = append(next, et)
						continue
					}
				}
				if !f.IsExported() {
					continue
				}
				if name == "" {
					name = f.Name
				}
				if _, shallower := fields[name]; !shallower {
					found[name] = f.Type
				}
			}
		}
		for name, ft := range found {
			fields[name] = ft
		}
		level = next
	}
	return fields
}

// write encodes v: an object with its repeated keys in order, anything else with
// encoding/json (maps with sorted keys).
func write(buf *bytes.Buffer, v any) error {
	obj, ok := v.(object)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf.Write(b)
		return nil
	}
	buf.WriteByte('{')
	first := true
	for _, m := range obj {
		for _, value := range m.values {
			if !first {
				buf.WriteByte(',')
			}
			first = false
			key, err := json.Marshal(m.key)
			if err != nil {
				return err
			}
			buf.Write(key)
			buf.WriteByte(':')
			if err := write(buf, value); err != nil {
				return err
			}
		}
	}
	buf.WriteByte('}')
	return nil
}
