package patch

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	fields := jsonfield.Of(a.Type())
	for i := range fields {
		f := &fields[i]
		av, bv := f.Value(a), f.Value(b)
		inA, inB := f.Encoded(av), f.Encoded(bv)
		switch {
		case !inA && !inB:
		case inA && !inB:
			d.ops = append(d.ops, Operation{Operation: "remove", Path: string(appendToken(path, f.Name))})
		case !inA && inB:
			added = append(added, i)
		default:
			if err := d.value(appendToken(path, f.Name), av, bv); err != nil {
				return err
			}
		}
	}
	for _, i := range added {
		v, err := encodeValue(fields[i].Value(b))
		if err != nil {
			return err
		}
		d.ops = append(d.ops, Operation{Operation: "add", Path: string(appendToken(path, fields[i].Name)), Value: json.RawMessage(v)})
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
