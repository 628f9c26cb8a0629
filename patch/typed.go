package patch

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/synchook/synchook/internal/jsonfield"
	"github.com/synchook/synchook/internal/jsonscan"
)

// DiffTyped returns the operations that DiffMarshaled gives for json.Marshal(before) and
// json.Marshal(after), where before and after are pointers to values of the same struct type,
// without encoding either whole: it walks the two values field by field (encoding/json's field
// names, embedding, omitempty and omitzero), skips fields that reflect.DeepEqual finds equal,
// descends into structs (and non-nil pointers to structs) that differ, and encodes only the
// differing fields that are anything else (maps, slices, scalars, types with their own
// MarshalJSON), diffing those encodings with DiffMarshaled. So its cost follows the size of
// the values (one comparison) plus what changed, not two encodings of the whole.
//
// Operations come in the order DiffMarshaled gives them for the two encodings, whose members are
// in the same (field) order: per object, members of before in order (removed or diffed), then
// the members only after has, in order.
//
// Errors: before and after are not non-nil pointers to structs of one type, or encoding a field
// failed (as json.Marshal would).
func DiffTyped(before, after any) ([]Operation, error) {
	a, b := reflect.ValueOf(before), reflect.ValueOf(after)
	if a.Kind() != reflect.Pointer || b.Kind() != reflect.Pointer || a.Type() != b.Type() || a.IsNil() || b.IsNil() || a.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("diff typed: want two non-nil pointers to structs of one type, got %T and %T", before, after)
	}
	if descentOf(a.Type()) != descendPointer {
		return nil, fmt.Errorf("diff typed: %T encodes itself", before)
	}
	d := typedDiffer{path: make([]byte, 0, 128)}
	if err := d.structs(a.Elem(), b.Elem()); err != nil {
		return nil, err
	}
	return d.ops, nil
}

// typedDiffer collects the operations of DiffTyped.
type typedDiffer struct {
	ops []Operation
	// path is the JSON Pointer of the values being compared (shared: copied into operations).
	path []byte
}

// structs diffs two struct values of one type found at path (both present in their encodings).
func (d *typedDiffer) structs(a, b reflect.Value) error {
	var added []int // fields only b encodes, emitted after the rest as DiffMarshaled does
	fields := planOf(a.Type())
	at := len(d.path)
	var pa, pb unsafe.Pointer // the two structs in memory, where they are addressable
	if a.CanAddr() && b.CanAddr() {
		pa, pb = a.Addr().UnsafePointer(), b.Addr().UnsafePointer()
	}
	for i := range fields {
		f := &fields[i]
		if f.quick != nil && pa != nil && f.quick(unsafe.Add(pa, f.offset), unsafe.Add(pb, f.offset)) {
			continue // alike: encoded alike or left out alike, as the steps below would find
		}
		av, bv := f.Value(a), f.Value(b)
		inA, inB := f.Encoded(av), f.Encoded(bv)
		switch {
		case !inA && !inB:
		case inA && !inB:
			d.path = append(append(d.path, '/'), f.token...)
			d.ops = append(d.ops, Operation{Operation: "remove", Path: string(d.path)})
		case !inA && inB:
			added = append(added, i)
		case f.descent > descendSlice && equal(av, bv, f.descent): // a leaf: no path needed
		default:
			d.path = append(append(d.path, '/'), f.token...)
			if err := d.value(av, bv, f.descent); err != nil {
				return err
			}
		}
		d.path = d.path[:at]
	}
	for _, i := range added {
		v, err := encodeValue(fields[i].Value(b))
		if err != nil {
			return err
		}
		d.ops = append(d.ops, Operation{Operation: "add", Path: string(append(append(d.path, '/'), fields[i].token...)), Value: json.RawMessage(v)})
		d.path = d.path[:at]
	}
	return nil
}

// value diffs two values of one type found at d.path, both encoded there: a struct field by
// field, a slice of one length element by element; anything else nothing when equal finds them
// equal, else per the type's descent (descentOf). So each unchanged field is compared once.
func (d *typedDiffer) value(a, b reflect.Value, desc descent) error {
	switch {
	case desc == descendStruct:
		return d.structs(a, b)
	case desc == descendPointer && !a.IsNil() && !b.IsNil():
		return d.structs(a.Elem(), b.Elem())
	case desc == descendSlice && !a.IsNil() && !b.IsNil() && a.Len() == b.Len():
		// DiffMarshaled diffs arrays of one length element by element
		at := len(d.path)
		elem, elemEq := descentOf(a.Type().Elem()), equalFuncOf(a.Type().Elem())
		for i := range a.Len() {
			ai, bi := a.Index(i), b.Index(i)
			if elem > descendSlice && equal(ai, bi, elem) || elemEq(ai.Addr().UnsafePointer(), bi.Addr().UnsafePointer()) {
				continue // alike (the quick equality, not a walk: most elements are): no path needed
			}
			d.path = strconv.AppendInt(append(d.path, '/'), int64(i), 10)
			if err := d.value(ai, bi, elem); err != nil {
				return err
			}
			d.path = d.path[:at]
		}
		return nil
	case equal(a, b, desc):
		return nil
	}
	switch desc {
	case descendStringMap:
		if !a.IsNil() && !b.IsNil() {
			d.stringMaps(a, b)
			return nil
		}
	case descendMap:
		if !a.IsNil() && !b.IsNil() {
			return d.maps(a, b)
		}
	}
	ea, err := encodeValue(a)
	if err != nil {
		return err
	}
	eb, err := encodeValue(b)
	if err != nil {
		return err
	}
	var sub differ
	sub.value(slices.Clone(d.path), ea, eb)
	d.ops = append(d.ops, sub.ops...)
	return nil
}

// equal reports whether two values of one type (not structs: DiffTyped walks those) encode
// alike: scalars, pointers to them and maps of strings compared directly, anything else in
// place with the type's quick equality (equalFuncOf), or reflect.DeepEqual where the values
// are copies.
func equal(a, b reflect.Value, desc descent) bool {
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() && b.IsNil()
		}
		if k := a.Elem().Kind(); k != reflect.Struct && k != reflect.Pointer && k != reflect.Map {
			return equal(a.Elem(), b.Elem(), encodeWhole)
		}
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if desc == descendStringMap {
			return maps.Equal(stringMap(a), stringMap(b))
		}
	}
	if a.CanAddr() && b.CanAddr() { // in place: the quick equality, no copy of a large value
		return equalFuncOf(a.Type())(a.Addr().UnsafePointer(), b.Addr().UnsafePointer())
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// planField is a member of a struct with the descent of its type.
type planField struct {
	*jsonfield.Field
	descent descent
	token   []byte // the name as a reference token (escaped)
	// quick, where not nil, is the quick equality of the field's type (equalFuncOf), read at
	// offset in the struct: when it finds the two fields alike, structs skips the field, which
	// its steps would leave with no operation. Set for the fields whose steps compare with that
	// same equality (leaves and slices, never a struct it walks) and whose leaving out follows
	// from it: not omitzero (a type's IsZero may read what the equality skips), not through an
	// embedded pointer.
	quick  eqFunc
	offset uintptr
}

var plans sync.Map // reflect.Type → []planField

// planOf returns the members of the struct type t (jsonfield.Of) with their descents, worked
// out once per type.
func planOf(t reflect.Type) []planField {
	if p, ok := plans.Load(t); ok {
		return p.([]planField)
	}
	fs := jsonfield.Of(t)
	p := make([]planField, len(fs))
	for i := range fs {
		p[i] = planField{Field: &fs[i], descent: descentOf(fs[i].Type), token: jsonscan.AppendToken(nil, fs[i].Name)}
		if off, ok := offsetOf(t, fs[i].Index); ok && quickSkips(&fs[i], p[i].descent) {
			p[i].quick, p[i].offset = equalFuncOf(fs[i].Type), off
		}
	}
	plans.Store(t, p)
	return p
}

// quickSkips reports whether structs may skip the field f of descent desc where its quick
// equality finds the two values alike (planField.quick).
func quickSkips(f *jsonfield.Field, desc descent) bool {
	return desc >= descendSlice && !f.OmitZero
}

// descent is how DiffTyped goes into two unequal values of a type.
type descent int

const (
	// descendStruct: field by field.
	descendStruct descent = iota
	// descendPointer: field by field of the pointed-to structs, when neither is nil.
	descendPointer
	// descendSlice: element by element, when neither is nil and their lengths are equal.
	descendSlice
	// encodeWhole: encode both and diff the encodings (scalars, types that encode themselves,
	// interfaces, byte slices). This and the descents below are leaves: compared (equal)
	// before anything else.
	encodeWhole
	// descendStringMap: a map[string]string (or of string kinds) compared without reflection.
	descendStringMap
	// descendMap: key by key, when neither is nil (string keys).
	descendMap
)

var descents sync.Map // reflect.Type → descent

// descentOf returns the descent of type t, worked out once per type.
func descentOf(t reflect.Type) descent {
	if d, ok := descents.Load(t); ok {
		return d.(descent)
	}
	d := encodeWhole
	if !marshalsItself(t) {
		switch t.Kind() {
		case reflect.Struct:
			d = descendStruct
		case reflect.Pointer:
			if t.Elem().Kind() == reflect.Struct && !marshalsItself(t.Elem()) {
				d = descendPointer
			}
		case reflect.Slice:
			if t.Elem().Kind() != reflect.Uint8 {
				d = descendSlice
			}
		case reflect.Map:
			if t.Key().Kind() == reflect.String && !marshalsItself(t.Key()) {
				d = descendMap
				if t.Elem().Kind() == reflect.String && !marshalsItself(t.Elem()) {
					d = descendStringMap
				}
			}
		}
	}
	descents.Store(t, d)
	return d
}

// stringMaps is maps for two non-nil maps of string kinds to string kinds.
func (d *typedDiffer) stringMaps(a, b reflect.Value) {
	at := len(d.path)
	child := func(k string) string {
		s := string(jsonscan.AppendToken(append(d.path, '/'), k))
		d.path = d.path[:at]
		return s
	}
	am, bm := stringMap(a), stringMap(b)
	keys := make([]string, 0, max(len(am), len(bm)))
	for k := range am {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		bv, ok := bm[k]
		switch {
		case !ok:
			d.ops = append(d.ops, Operation{Operation: "remove", Path: child(k)})
		case bv != am[k]:
			d.ops = append(d.ops, Operation{Operation: "replace", Path: child(k), Value: json.RawMessage(jsonscan.AppendString(nil, bv))})
		}
	}
	keys = keys[:0]
	for k := range bm {
		if _, ok := am[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		d.ops = append(d.ops, Operation{Operation: "add", Path: child(k), Value: json.RawMessage(jsonscan.AppendString(nil, bm[k]))})
	}
}

// stringMap returns the map of string kinds v as a map[string]string: v itself when it is
// one, else a copy.
func stringMap(v reflect.Value) map[string]string {
	if m, ok := v.Interface().(map[string]string); ok {
		return m
	}
	m := make(map[string]string, v.Len())
	for it := v.MapRange(); it.Next(); {
		m[it.Key().String()] = it.Value().String()
	}
	return m
}

// maps diffs two non-nil maps with string keys as DiffMarshaled diffs their encodings, whose
// keys encoding/json sorts: the keys of a in order (removed or diffed), then those only b has.
func (d *typedDiffer) maps(a, b reflect.Value) error {
	at := len(d.path)
	elem := descentOf(a.Type().Elem())
	keys := func(m reflect.Value) []reflect.Value {
		ks := m.MapKeys()
		slices.SortFunc(ks, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		return ks
	}
	for _, k := range keys(a) {
		bv := b.MapIndex(k)
		d.path = jsonscan.AppendToken(append(d.path, '/'), k.String())
		if !bv.IsValid() {
			d.ops = append(d.ops, Operation{Operation: "remove", Path: string(d.path)})
		} else if err := d.value(a.MapIndex(k), bv, elem); err != nil {
			return err
		}
		d.path = d.path[:at]
	}
	for _, k := range keys(b) {
		if a.MapIndex(k).IsValid() {
			continue
		}
		v, err := encodeValue(b.MapIndex(k))
		if err != nil {
			return err
		}
		d.ops = append(d.ops, Operation{Operation: "add", Path: string(jsonscan.AppendToken(append(d.path, '/'), k.String())), Value: json.RawMessage(v)})
		d.path = d.path[:at]
	}
	return nil
}

// encodeValue encodes v as json.Marshal does where v sits in an encoded object (addressable
// values use their pointer methods).
func encodeValue(v reflect.Value) ([]byte, error) {
	if v.CanAddr() {
		return json.Marshal(v.Addr().Interface())
	}
	return json.Marshal(v.Interface())
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[interface{ MarshalText() ([]byte, error) }]()
)

// marshalsItself reports whether encoding/json hands a value of type t (addressable, as in an
// encoded object) to its own MarshalJSON or MarshalText.
func marshalsItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonMarshaler) || pt.Implements(jsonMarshaler) || t.Implements(textMarshaler) || pt.Implements(textMarshaler)
}
