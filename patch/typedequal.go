package patch

import (
	"maps"
	"reflect"
	"sync"
	"unsafe"

	"github.com/synchook/synchook/internal/jsonfield"
)

// eqFunc reports whether the two values of one type at a and b encode alike: every member
// encoding/json writes holds the same value. It is DiffTyped's quick test for a subtree before
// it walks it (the typed values DiffTyped compares are a decoded object and a deep copy of it
// changed by hooks, so most subtrees are equal).
type eqFunc func(a, b unsafe.Pointer) bool

var eqFuncs sync.Map // reflect.Type → *eqEntry

// eqEntry holds a type's eqFunc, set once it is built (a recursive type finds its own entry
// while it is being built and calls through it).
type eqEntry struct {
	fn eqFunc
}

var eqBuild sync.Mutex // serialises building, so a half-built entry is never used by another goroutine

// equalFuncOf returns the eqFunc of type t, built once per type.
func equalFuncOf(t reflect.Type) eqFunc {
	if e, ok := eqFuncs.Load(t); ok && e.(*eqEntry).fn != nil {
		return e.(*eqEntry).fn
	}
	eqBuild.Lock()
	defer eqBuild.Unlock()
	return buildEqual(t, map[reflect.Type]*eqEntry{})
}

// buildEqual builds t's eqFunc under eqBuild; building holds the entries of the types being
// built (a recursive reference calls through its entry).
func buildEqual(t reflect.Type, building map[reflect.Type]*eqEntry) eqFunc {
	if e, ok := eqFuncs.Load(t); ok && e.(*eqEntry).fn != nil {
		return e.(*eqEntry).fn
	}
	if e, ok := building[t]; ok {
		return func(a, b unsafe.Pointer) bool { return e.fn(a, b) }
	}
	e := &eqEntry{}
	building[t] = e
	fn := makeEqual(t, building)
	e.fn = fn
	eqFuncs.Store(t, e)
	return fn
}

// makeEqual makes t's eqFunc: direct comparisons for strings, numbers, bools, pointers, slices,
// maps of strings and structs of those (only the members encoding/json writes); reflect.DeepEqual
// for the rest (types that encode themselves, interfaces, other maps), which is stricter than
// "encodes alike" and so never says equal wrongly.
func makeEqual(t reflect.Type, building map[reflect.Type]*eqEntry) eqFunc {
	deep := func(a, b unsafe.Pointer) bool {
		return reflect.DeepEqual(reflect.NewAt(t, a).Interface(), reflect.NewAt(t, b).Interface())
	}
	if marshalsItself(t) {
		return deep
	}
	switch t.Kind() {
	case reflect.String:
		return func(a, b unsafe.Pointer) bool { return *(*string)(a) == *(*string)(b) }
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		switch t.Size() {
		case 1:
			return func(a, b unsafe.Pointer) bool { return *(*uint8)(a) == *(*uint8)(b) }
		case 2:
			return func(a, b unsafe.Pointer) bool { return *(*uint16)(a) == *(*uint16)(b) }
		case 4:
			return func(a, b unsafe.Pointer) bool { return *(*uint32)(a) == *(*uint32)(b) }
		case 8:
			return func(a, b unsafe.Pointer) bool { return *(*uint64)(a) == *(*uint64)(b) }
		}
		return deep
	case reflect.Pointer:
		elem := buildEqual(t.Elem(), building)
		return func(a, b unsafe.Pointer) bool {
			pa, pb := *(*unsafe.Pointer)(a), *(*unsafe.Pointer)(b)
			if pa == nil || pb == nil {
				return pa == pb
			}
			return pa == pb || elem(pa, pb)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return func(a, b unsafe.Pointer) bool {
				sa, sb := *(*[]byte)(a), *(*[]byte)(b)
				return (sa == nil) == (sb == nil) && string(sa) == string(sb)
			}
		}
		elem, size := buildEqual(t.Elem(), building), t.Elem().Size()
		return func(a, b unsafe.Pointer) bool {
			ha, hb := (*sliceHeader)(a), (*sliceHeader)(b)
			if ha.len != hb.len || (ha.data == nil) != (hb.data == nil) {
				return false
			}
			for i := range uintptr(ha.len) {
				if !elem(unsafe.Add(ha.data, i*size), unsafe.Add(hb.data, i*size)) {
					return false
				}
			}
			return true
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String && !marshalsItself(t.Key()) && !marshalsItself(t.Elem()) {
			return func(a, b unsafe.Pointer) bool { // map[K]V of string kinds: a map[string]string in memory
				ma, mb := *(*map[string]string)(a), *(*map[string]string)(b)
				return (ma == nil) == (mb == nil) && maps.Equal(ma, mb)
			}
		}
		return deep
	case reflect.Struct:
		type member struct {
			offset uintptr
			eq     eqFunc
		}
		var members []member
		for _, f := range jsonfield.Of(t) {
			offset, ok := offsetOf(t, f.Index)
			if !ok {
				return deep // through an embedded pointer
			}
			members = append(members, member{offset, buildEqual(f.Type, building)})
		}
		return func(a, b unsafe.Pointer) bool {
			for _, m := range members {
				if !m.eq(unsafe.Add(a, m.offset), unsafe.Add(b, m.offset)) {
					return false
				}
			}
			return true
		}
	}
	return deep // floats (NaN), interfaces, arrays, funcs, channels
}

// sliceHeader is the memory layout of a slice.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// offsetOf returns the offset of the field at reflect's index path in struct t, false when the
// path goes through an embedded pointer.
func offsetOf(t reflect.Type, index []int) (uintptr, bool) {
	var off uintptr
	for i, x := range index {
		if i > 0 {
			if t.Kind() != reflect.Struct {
				return 0, false
			}
		}
		f := t.Field(x)
		off += f.Offset
		t = f.Type
		if i < len(index)-1 && t.Kind() == reflect.Pointer {
			return 0, false
		}
	}
	return off, true
}
