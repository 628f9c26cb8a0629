package patch

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	if marshalsItself(a.Type()) || marshalsItself(a.Type().Elem()) {
		return nil, fmt.Errorf("diff typed: %T encodes itself", before)
	}
	var d typedDiffer
	if err := d.structs(nil, a.Elem(), b.Elem()); err != nil {
		return nil, err
	}
	return d.ops, nil
}

// typedDiffer collects the operations of DiffTyped.
type typedDiffer struct {
	ops []Operation
}

// structs diffs two struct values of one type found at path (both present in their encodings).
func (d *typedDiffer) structs(path []byte, a, b reflect.Value) error {
	var added []int // fields only b encodes, emitted after the rest as DiffMarshaled does
	fields := fieldsOf(a.Type())
	for i := range fields {
		f := &fields[i]
		av, bv := fieldValue(a, f.index), fieldValue(b, f.index)
		inA, inB := f.encoded(av), f.encoded(bv)
		switch {
		case !inA && !inB:
		case inA && !inB:
			d.ops = append(d.ops, Operation{Operation: "remove", Path: string(appendToken(path, f.name))})
		case !inA && inB:
			added = append(added, i)
		default:
			if err := d.value(appendToken(path, f.name), av, bv); err != nil {
				return err
			}
		}
	}
	for _, i := range added {
		v, err := encodeValue(fieldValue(b, fields[i].index))
		if err != nil {
			return err
		}
		d.ops = append(d.ops, Operation{Operation: "add", Path: string(appendToken(path, fields[i].name)), Value: json.RawMessage(v)})
	}
	return nil
}

// value diffs two values of one type found at path, both encoded there: a struct field by
// field; anything else nothing when reflect.DeepEqual finds them equal, else per the type's
// descent (descentOf). So each unchanged field is compared once.
func (d *typedDiffer) value(path []byte, a, b reflect.Value) error {
	desc := descentOf(a.Type())
	switch {
	case desc == descendStruct:
		return d.structs(path, a, b)
	case desc == descendPointer && !a.IsNil() && !b.IsNil():
		return d.structs(path, a.Elem(), b.Elem())
	case a.CanAddr() && b.CanAddr(): // compare through pointers: no copy of a large value
		if reflect.DeepEqual(a.Addr().Interface(), b.Addr().Interface()) {
			return nil
		}
	case reflect.DeepEqual(a.Interface(), b.Interface()):
		return nil
	}
	switch desc {
	case descendSlice:
		if !a.IsNil() && !b.IsNil() && a.Len() == b.Len() {
			// DiffMarshaled diffs arrays of one length element by element
			for i := range a.Len() {
				if err := d.value(strconv.AppendInt(append(path[:len(path):len(path)], '/'), int64(i), 10), a.Index(i), b.Index(i)); err != nil {
					return err
				}
			}
			return nil
		}
	case descendStringMap:
		if !a.IsNil() && !b.IsNil() {
			d.stringMaps(path, a, b)
			return nil
		}
	case descendMap:
		if !a.IsNil() && !b.IsNil() {
			return d.maps(path, a, b)
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
	sub.value(path, ea, eb)
	d.ops = append(d.ops, sub.ops...)
	return nil
}

// descent is how DiffTyped goes into two unequal values of a type.
type descent int

const (
	// encodeWhole: encode both and diff the encodings (scalars, types that encode themselves,
	// interfaces, byte slices).
	encodeWhole descent = iota
	// descendStruct: field by field.
	descendStruct
	// descendPointer: field by field of the pointed-to structs, when neither is nil.
	descendPointer
	// descendSlice: element by element, when neither is nil and their lengths are equal.
	descendSlice
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
func (d *typedDiffer) stringMaps(path []byte, a, b reflect.Value) {
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
			d.ops = append(d.ops, Operation{Operation: "remove", Path: string(appendToken(path, k))})
		case bv != am[k]:
			d.ops = append(d.ops, Operation{Operation: "replace", Path: string(appendToken(path, k)), Value: json.RawMessage(jsonscan.AppendString(nil, bv))})
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
		d.ops = append(d.ops, Operation{Operation: "add", Path: string(appendToken(path, k)), Value: json.RawMessage(jsonscan.AppendString(nil, bm[k]))})
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
func (d *typedDiffer) maps(path []byte, a, b reflect.Value) error {
	keys := func(m reflect.Value) []reflect.Value {
		ks := m.MapKeys()
		slices.SortFunc(ks, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		return ks
	}
	for _, k := range keys(a) {
		bv := b.MapIndex(k)
		child := appendToken(path, k.String())
		if !bv.IsValid() {
			d.ops = append(d.ops, Operation{Operation: "remove", Path: string(child)})
			continue
		}
		if err := d.value(child, a.MapIndex(k), bv); err != nil {
			return err
		}
	}
	for _, k := range keys(b) {
		if a.MapIndex(k).IsValid() {
			continue
		}
		v, err := encodeValue(b.MapIndex(k))
		if err != nil {
			return err
		}
		d.ops = append(d.ops, Operation{Operation: "add", Path: string(appendToken(path, k.String())), Value: json.RawMessage(v)})
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

// fieldValue returns the field at index of the struct v, the zero Value when an embedded
// pointer on the way is nil (encoding/json then leaves its fields out).
func fieldValue(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

// typedField is one member encoding/json writes for a struct: its name, where it is
// (reflect's index path through embedded structs) and how it is left out.
type typedField struct {
	name                string
	index               []int
	omitEmpty, omitZero bool
	isZero              func(reflect.Value) bool
}

// encoded reports whether encoding/json writes the field with value v.
func (f *typedField) encoded(v reflect.Value) bool {
	if !v.IsValid() {
		return false
	}
	if f.omitEmpty && isEmptyValue(v) {
		return false
	}
	return !f.omitZero || !f.isZero(v)
}

// isEmptyValue is encoding/json's emptiness for omitempty.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[interface{ MarshalText() ([]byte, error) }]()
	isZeroer      = reflect.TypeFor[interface{ IsZero() bool }]()
	typedFields   sync.Map // reflect.Type → []typedField
)

// marshalsItself reports whether encoding/json hands a value of type t (addressable, as in an
// encoded object) to its own MarshalJSON or MarshalText.
func marshalsItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonMarshaler) || pt.Implements(jsonMarshaler) || t.Implements(textMarshaler) || pt.Implements(textMarshaler)
}

// fieldsOf returns the members encoding/json writes for the struct type t, in its order.
// Embedded structs without a name are flattened; where two embedded fields at the same depth
// give one name, encoding/json drops both and so does this (fields of k8s.io/api types never
// clash).
func fieldsOf(t reflect.Type) []typedField {
	if fs, ok := typedFields.Load(t); ok {
		return fs.([]typedField)
	}
	var fs []typedField
	collectFields(t, nil, &fs)
	fs = dominantFields(fs)
	typedFields.Store(t, fs)
	return fs
}

// collectFields appends the fields of t at the index path prefix to fs.
func collectFields(t reflect.Type, prefix []int, fs *[]typedField) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if !sf.IsExported() && ft.Kind() != reflect.Struct {
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		index := append(append([]int(nil), prefix...), i)
		if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
			collectFields(ft, index, fs)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := typedField{name: name, index: index}
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "omitempty":
				f.omitEmpty = true
			case "omitzero":
				f.omitZero = true
				f.isZero = zeroFunc(sf.Type)
			}
		}
		*fs = append(*fs, f)
	}
}

// zeroFunc is encoding/json's omitzero test for type t: its IsZero method when it has one,
// else reflect's zero.
func zeroFunc(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Pointer && t.Implements(isZeroer):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
		}
	case t.Implements(isZeroer):
		return func(v reflect.Value) bool { return v.Interface().(interface{ IsZero() bool }).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroer):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				c := reflect.New(t).Elem()
				c.Set(v)
				v = c
			}
			return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
		}
	}
	return reflect.Value.IsZero
}

// dominantFields keeps, per name, the field encoding/json writes: the shallowest, when it is
// the only one at its depth (Go's ambiguity rule; encoding/json lets a json tag break a tie,
// which the fields of k8s.io/api types never need: such a tie is dropped here).
func dominantFields(fs []typedField) []typedField {
	minDepth, atMin := map[string]int{}, map[string]int{}
	for _, f := range fs {
		switch d, ok := minDepth[f.name]; {
		case !ok || len(f.index) < d:
			minDepth[f.name], atMin[f.name] = len(f.index), 1
		case len(f.index) == d:
			atMin[f.name]++
		}
	}
	out := fs[:0:0]
	for _, f := range fs {
		if len(f.index) == minDepth[f.name] && atMin[f.name] == 1 {
			out = append(out, f)
		}
	}
	return out
}
