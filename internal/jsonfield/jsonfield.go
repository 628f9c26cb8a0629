// Package jsonfield tells which members encoding/json writes for a Go struct type, and how it
// leaves them out: the one reading of json tags that the typed compare (patch.DiffTyped) and
// the typed strip (builtin) share. Names, embedding, omitempty and omitzero follow
// encoding/json (https://pkg.go.dev/encoding/json#Marshal).
package jsonfield

import (
	"cmp"
	"reflect"
	"strings"
	"sync"
)

// Field is one member encoding/json writes for a struct.
type Field struct {
	// Name is the member's name.
	Name string
	// Type is the field's Go type.
	Type reflect.Type
	// Index is reflect's index path to the field through embedded structs.
	Index []int
	// OmitEmpty and OmitZero are the tag's options.
	OmitEmpty, OmitZero bool
	isZero              func(reflect.Value) bool
}

// Value returns the field of the struct v, the zero Value when an embedded pointer on the way
// is nil (encoding/json then leaves the field out).
func (f *Field) Value(v reflect.Value) reflect.Value {
	for i, x := range f.Index {
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

// Encoded reports whether encoding/json writes the field with value v (Value's answer).
func (f *Field) Encoded(v reflect.Value) bool {
	if !v.IsValid() {
		return false
	}
	if f.OmitEmpty && isEmptyValue(v) {
		return false
	}
	return !f.OmitZero || !f.isZero(v)
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
	isZeroer = reflect.TypeFor[interface{ IsZero() bool }]()
	cache    sync.Map // reflect.Type → []Field
)

// Of returns the members encoding/json writes for the struct type t, in its order (shared:
// do not change). Embedded structs without a name are flattened; where two fields at the same
// shallowest depth give one name, encoding/json lets a json tag break the tie, which the fields
// of k8s.io/api types never need: such a tie is dropped here.
func Of(t reflect.Type) []Field {
	if fs, ok := cache.Load(t); ok {
		return fs.([]Field)
	}
	var fs []Field
	collect(t, nil, &fs)
	fs = dominant(fs)
	cache.Store(t, fs)
	return fs
}

// Named returns the member of struct type t named name (exactly), false when there is none.
func Named(t reflect.Type, name string) (*Field, bool) {
	fs := Of(t)
	for i := range fs {
		if fs[i].Name == name {
			return &fs[i], true
		}
	}
	return nil, false
}

// collect appends the fields of t at the index path prefix to fs.
func collect(t reflect.Type, prefix []int, fs *[]Field) {
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
			collect(ft, index, fs)
			continue
		}
		name = cmp.Or(name, sf.Name)
		f := Field{Name: name, Type: sf.Type, Index: index}
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "omitempty":
				f.OmitEmpty = true
			case "omitzero":
				f.OmitZero = true
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

// dominant keeps, per name, the shallowest field when it is the only one at its depth.
func dominant(fs []Field) []Field {
	minDepth, atMin := map[string]int{}, map[string]int{}
	for _, f := range fs {
		switch d, ok := minDepth[f.Name]; {
		case !ok || len(f.Index) < d:
			minDepth[f.Name], atMin[f.Name] = len(f.Index), 1
		case len(f.Index) == d:
			atMin[f.Name]++
		}
	}
	out := fs[:0:0]
	for _, f := range fs {
		if len(f.Index) == minDepth[f.Name] && atMin[f.Name] == 1 {
			out = append(out, f)
		}
	}
	return out
}
