package patch

import (
	"maps"
	"reflect"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/synchook/synchook/internal/jsonfield"
)

// eqFunc reports whether the two values of one type at a and b encode alike: every member
// encoding/json writes holds the same value. It is DiffTyped's quick test for a subtree before
// it walks it (the typed values DiffTyped compares are a decoded object and a deep copy of it
// changed by hooks, so most subtrees are equal).
type eqFunc func(a, b unsafe.Pointer) bool

var eqFuncs sync.Map // eqKey → *eqEntry

// eqKey names an eqFunc: a type's, comparing what encoding/json writes of it, or (all) every
// field, as reflect.DeepEqual does (inside types that encode themselves, whose encoding
// depends on fields encoding/json does not see).
type eqKey struct {
	t   reflect.Type
	all bool
}

// eqEntry holds a type's eqFunc, set once it is built (a recursive type finds its own entry
// while it is being built and calls through it).
type eqEntry struct {
	fn eqFunc
}

var eqBuild sync.Mutex // serialises building, so a half-built entry is never used by another goroutine

// equalFuncOf returns the eqFunc of type t, built once per type.
func equalFuncOf(t reflect.Type) eqFunc {
	if e, ok := eqFuncs.Load(eqKey{t: t}); ok && e.(*eqEntry).fn != nil {
		return e.(*eqEntry).fn
	}
	eqBuild.Lock()
	defer eqBuild.Unlock()
	return buildEqual(eqKey{t: t}, map[eqKey]*eqEntry{})
}

// buildEqual builds k's eqFunc under eqBuild; building holds the entries of the types being
// built (a recursive reference calls through its entry).
func buildEqual(k eqKey, building map[eqKey]*eqEntry) eqFunc {
	if e, ok := eqFuncs.Load(k); ok && e.(*eqEntry).fn != nil {
		return e.(*eqEntry).fn
	}
	if e, ok := building[k]; ok {
		return func(a, b unsafe.Pointer) bool { return e.fn(a, b) }
	}
	e := &eqEntry{}
	building[k] = e
	fn := makeEqual(k, building)
	e.fn = fn
	eqFuncs.Store(k, e)
	return fn
}

// makeEqual makes k's eqFunc: direct comparisons for strings, numbers, bools, pointers, slices,
// maps with string keys and structs of those — only the members encoding/json writes, or every
// field (k.all) in a type that encodes itself, as reflect.DeepEqual compares it; reflect.DeepEqual
// for the rest (interfaces, floats, other maps), which is stricter than "encodes alike" and so
// never says equal wrongly.
func makeEqual(k eqKey, building map[eqKey]*eqEntry) eqFunc {
	t, all := k.t, k.all
	deep := func(a, b unsafe.Pointer) bool {
		return reflect.DeepEqual(reflect.NewAt(t, a).Interface(), reflect.NewAt(t, b).Interface())
	}
	if !all && marshalsItself(t) {
		return buildEqual(eqKey{t: t, all: true}, building)
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
		elem := buildEqual(eqKey{t.Elem(), all}, building)
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
		elem, size := buildEqual(eqKey{t.Elem(), all}, building), t.Elem().Size()
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
		if t.Key().Kind() != reflect.String {
			return deep
		}
		if t.Elem().Kind() == reflect.String && (all || !marshalsItself(t.Elem())) {
			return func(a, b unsafe.Pointer) bool { // map[K]V of string kinds: a map[string]string in memory
				ma, mb := *(*map[string]string)(a), *(*map[string]string)(b)
				return (ma == nil) == (mb == nil) && maps.Equal(ma, mb)
			}
		}
		if t.Elem() == quantityType { // a ResourceList or another map of quantities
			return quantityMapEqual(buildEqual(eqKey{t.Elem(), all}, building))
		}
		return mapEqual(t, buildEqual(eqKey{t.Elem(), all}, building))
	case reflect.Struct:
		type member struct {
			offset uintptr
			eq     eqFunc
		}
		var members []member
		if all {
			for i := range t.NumField() {
				f := t.Field(i)
				members = append(members, member{f.Offset, buildEqual(eqKey{f.Type, true}, building)})
			}
		}
		for _, f := range jsonfield.Of(t) {
			if all {
				break
			}
			offset, ok := offsetOf(t, f.Index)
			if !ok {
				return deep // through an embedded pointer
			}
			members = append(members, member{offset, buildEqual(eqKey{t: f.Type}, building)})
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

// mapEqual returns the eqFunc of the map type t with string-kind keys whose values compare
// with elem: both nil or both not, one length, and each key of one holds an equal value in the
// other. Keys and values are copied into slots (pooled, so a compare allocates nothing); the
// other map's key is found by walking it where it is small, as the maps of objects are
// (requests, limits), else by MapIndex.
func mapEqual(t reflect.Type, elem eqFunc) eqFunc {
	slots := sync.Pool{New: func() any {
		return &mapSlots{reflect.New(t.Key()).Elem(), reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem(), reflect.New(t.Elem()).Elem()}
	}}
	return func(a, b unsafe.Pointer) bool {
		ma, mb := reflect.NewAt(t, a).Elem(), reflect.NewAt(t, b).Elem()
		if ma.IsNil() != mb.IsNil() || ma.Len() != mb.Len() {
			return false
		}
		if ma.Len() == 0 || ma.UnsafePointer() == mb.UnsafePointer() {
			return true
		}
		s := slots.Get().(*mapSlots)
		defer slots.Put(s)
		defer s.clear()
		return s.equal(ma, mb, elem)
	}
}

// quantityType is resource.Quantity, the values of a ResourceList: the maps of a Pod's
// containers (requests, limits), its overhead, a node's capacity.
var quantityType = reflect.TypeFor[resource.Quantity]()

// quantityPairs hold the two quantities quantityMapEqual compares (pooled: a value compared
// through an eqFunc would otherwise escape, one allocation per key).
var quantityPairs = sync.Pool{New: func() any { return new([2]resource.Quantity) }}

// quantityMapEqual is mapEqual for a map of string-kind keys to resource.Quantity, read as the
// map[string]resource.Quantity it is in memory (as makeEqual reads maps of strings): ranged and
// looked up directly, without reflect's iterators.
func quantityMapEqual(elem eqFunc) eqFunc {
	return func(a, b unsafe.Pointer) bool {
		ma, mb := *(*map[string]resource.Quantity)(a), *(*map[string]resource.Quantity)(b)
		if (ma == nil) != (mb == nil) || len(ma) != len(mb) {
			return false
		}
		if len(ma) == 0 || *(*unsafe.Pointer)(a) == *(*unsafe.Pointer)(b) { // one map
			return true
		}
		pair := quantityPairs.Get().(*[2]resource.Quantity)
		defer quantityPairs.Put(pair)
		defer clear(pair[:]) // a pooled pair holds nothing of the objects compared
		for k, va := range ma {
			vb, ok := mb[k]
			if !ok {
				return false
			}
			pair[0], pair[1] = va, vb
			if !elem(unsafe.Pointer(&pair[0]), unsafe.Pointer(&pair[1])) {
				return false
			}
		}
		return true
	}
}

// mapSlots are settable values of a map type's key (ka, kb) and value (va, vb) types.
type mapSlots struct {
	ka, kb, va, vb reflect.Value
}

// equal reports whether the non-empty maps a and b of one length hold equal values (elem) at
// the same keys.
func (s *mapSlots) equal(a, b reflect.Value, elem eqFunc) bool {
	var ia reflect.MapIter
	ia.Reset(a)
	for ia.Next() {
		s.ka.SetIterKey(&ia)
		s.va.SetIterValue(&ia)
		if !s.find(b) || !elem(s.va.Addr().UnsafePointer(), s.vb.Addr().UnsafePointer()) {
			return false
		}
	}
	return true
}

// find sets s.vb to the value of m at s.ka, false when m has no such key.
func (s *mapSlots) find(m reflect.Value) bool {
	if m.Len() > 8 {
		v := m.MapIndex(s.ka)
		if v.IsValid() {
			s.vb.Set(v)
		}
		return v.IsValid()
	}
	var it reflect.MapIter
	it.Reset(m)
	for it.Next() {
		if s.kb.SetIterKey(&it); s.kb.String() == s.ka.String() {
			s.vb.SetIterValue(&it)
			return true
		}
	}
	return false
}

// clear zeroes the slots, so a pooled one holds nothing of the objects compared.
func (s *mapSlots) clear() {
	s.ka.SetZero()
	s.kb.SetZero()
	s.va.SetZero()
	s.vb.SetZero()
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
