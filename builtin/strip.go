package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsonfield"
	"github.com/synchook/synchook/internal/jsonscan"
)

// Strip are the settings of the strip hook: the fields to remove from every object.
type Strip struct {
	// Paths are RFC 6901 JSON Pointers (e.g. "/status/hostIP",
	// "/metadata/annotations/example.com~1owner", "/spec/containers/1"), removed in order, in
	// which a step "*" (Wildcard) stands for every element where the value is an array
	// ("/spec/topologySpreadConstraints/*/matchLabelKeys") and is the literal key "*" where it
	// is an object. A path whose field (or a parent of it) does not exist is skipped.
	Paths []string `json:"paths"`
}

// StripFunc returns the mutate function of the strip hook. It fails when a path is not a JSON
// Pointer or points to a protected field (see CheckStripPath); the errors of all bad paths are
// joined.
//
// An *unstructured.Unstructured is changed in place. A typed object is changed in place along
// its Go type (the fields named as encoding/json names them): a removed field is set to its
// zero value, a map entry deleted, a slice element cut out — what converting it to its
// unstructured form, removing the path and converting back gives. A path through a value that
// encodes itself (resource.Quantity, metav1.Time, runtime.RawExtension, …) or an interface is
// taken that way: the object is converted, stripped and converted back into a new object,
// which is returned.
//
// A Wildcard step is walked once, not expanded into a path per element: the cost of a strip
// is linear in the size of the object, and a slice whose every element goes is cut once (a
// non-empty one becomes an empty slice, not nil).
//
// The function looks at its context at its step boundaries: before each path and after every
// 256 elements a Wildcard step visits (stepEvery). Once the context is done it stops there and
// returns a nil object and an error that wraps ctx.Err() (context.DeadlineExceeded or
// context.Canceled) and names the path; the object it was given may then be partly stripped
// and must be dropped. So the request's deadline bounds a strip: the engine runs synchook's own
// hooks on the request's goroutine, in the request's concurrency slot, with its context.
func StripFunc(s Strip) (hooks.MutateFunc, error) {
	var (
		paths [][]string
		errs  []error
	)
	for _, p := range s.Paths {
		tokens, err := parseStripPath(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		paths = append(paths, tokens)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return func(ctx context.Context, obj client.Object) (client.Object, error) {
		st := &stepper{ctx: ctx}
		if u, ok := obj.(runtime.Unstructured); ok {
			content := u.UnstructuredContent()
			removed, err := removeAll(st, content, paths)
			if err != nil {
				return nil, err
			}
			if removed {
				u.SetUnstructuredContent(content)
			}
			return obj, nil
		}
		root := reflect.ValueOf(obj)
		for i, tokens := range paths {
			if err := st.boundary(tokens); err != nil {
				return nil, err
			}
			typed, err := stripValue(st, root, tokens)
			if err != nil {
				return nil, err
			}
			if !typed {
				return stripThrough(st, obj, paths[i:])
			}
		}
		return obj, nil
	}, nil
}

// stepEvery is how many elements a Wildcard step visits between two looks at the context.
const stepEvery = 256

// stepper is a strip's step boundaries: it counts the elements Wildcard steps visit and looks
// at ctx every stepEvery of them. A nil *stepper has no boundaries (nothing stops it).
type stepper struct {
	ctx   context.Context
	path  []string // the path being stripped, for the error
	count int
}

// boundary starts the path tokens: it returns the context's error, wrapped and naming the
// path, once the context is done.
func (s *stepper) boundary(tokens []string) error {
	if s == nil {
		return nil
	}
	s.path = tokens
	if err := s.ctx.Err(); err != nil {
		return fmt.Errorf("strip %s: stopped at a step boundary: %w", jsonscan.Pointer(tokens), err)
	}
	return nil
}

// element counts one element a Wildcard step visits and, every stepEvery of them, returns the
// context's error as boundary does.
func (s *stepper) element() error {
	if s == nil {
		return nil
	}
	if s.count++; s.count%stepEvery != 0 {
		return nil
	}
	return s.boundary(s.path)
}

// stripValue removes the value at tokens (at least one) below v (a pointer to a struct, or a
// value inside one) along its Go type; a Wildcard step where the value is a slice stands for
// each of its elements (stripElements). It reports false where the path goes through a value
// that only its unstructured form can address (a type that encodes itself, an interface):
// stripThrough takes those. Whether a path gets there depends on the Go types along it alone,
// the same for every element of a Wildcard, so nothing of the path has been removed then. err
// is the context's, at a step boundary (stepper.element).
func stripValue(st *stepper, v reflect.Value, tokens []string) (typed bool, err error) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return true, nil // nothing there
		}
		v = v.Elem()
	}
	if selfEncoding(v.Type()) {
		return false, nil
	}
	tok, rest := tokens[0], tokens[1:]
	switch v.Kind() {
	case reflect.Struct:
		f, ok := jsonfield.Named(v.Type(), tok)
		if !ok {
			return true, nil
		}
		fv := f.Value(v)
		if !fv.IsValid() {
			return true, nil // behind a nil embedded pointer: absent
		}
		if len(rest) == 0 {
			fv.SetZero()
			return true, nil
		}
		return stripValue(st, fv, rest)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String || selfEncoding(v.Type().Key()) {
			return false, nil
		}
		key := reflect.ValueOf(tok).Convert(v.Type().Key())
		ev := v.MapIndex(key)
		if !ev.IsValid() {
			return true, nil
		}
		if len(rest) == 0 {
			v.SetMapIndex(key, reflect.Value{})
			return true, nil
		}
		c := reflect.New(ev.Type()).Elem() // map values cannot be changed in place
		c.Set(ev)
		if typed, err := stripValue(st, c, rest); !typed || err != nil {
			return typed, err
		}
		v.SetMapIndex(key, c)
		return true, nil
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return true, nil // []byte is a string in JSON: nothing below it
		}
		if tok == Wildcard {
			return stripElements(st, v, rest)
		}
		i, ok := arrayIndex(tok, v.Len())
		if !ok {
			return true, nil
		}
		if len(rest) == 0 {
			out := reflect.MakeSlice(v.Type(), 0, v.Len()-1)
			out = reflect.AppendSlice(out, v.Slice(0, i))
			v.Set(reflect.AppendSlice(out, v.Slice(i+1, v.Len())))
			return true, nil
		}
		return stripValue(st, v.Index(i), rest)
	case reflect.Interface:
		return false, nil
	}
	return true, nil // a scalar: nothing below it
}

// stripElements is stripValue's Wildcard step on the slice v: without rest every element goes
// (v becomes a new empty slice, once; an empty v is left as it is), else rest is stripped from
// each element, the last first, as the paths ConcretePaths yields are.
func stripElements(st *stepper, v reflect.Value, rest []string) (typed bool, err error) {
	if len(rest) == 0 {
		if v.Len() > 0 {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		}
		return true, nil
	}
	for i := v.Len() - 1; i >= 0; i-- {
		if err := st.element(); err != nil {
			return false, err
		}
		if typed, err := stripValue(st, v.Index(i), rest); !typed || err != nil {
			return typed, err
		}
	}
	return true, nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
)

// selfEncodingOf caches selfEncoding's answers by type: a Wildcard asks it once per element.
var selfEncodingOf sync.Map // reflect.Type → bool

// selfEncoding reports whether values of t encode or decode themselves in JSON (their
// unstructured form is not their fields).
func selfEncoding(t reflect.Type) bool {
	if v, ok := selfEncodingOf.Load(t); ok {
		return v.(bool)
	}
	pt := reflect.PointerTo(t)
	self := t.Implements(jsonMarshaler) || pt.Implements(jsonMarshaler) || t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler)
	selfEncodingOf.Store(t, self)
	return self
}

// stripThrough removes paths from a typed object through its unstructured form: it returns a
// new object when something was removed, else obj. Errors: obj is not a pointer to a struct
// or does not convert, and the context's at a step boundary.
func stripThrough(st *stepper, obj client.Object, paths [][]string) (client.Object, error) {
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("strip: cannot handle %T: want a pointer to a struct or an Unstructured", obj)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("strip: convert %T to unstructured: %w", obj, err)
	}
	removed, err := removeAll(st, content, paths)
	if err != nil {
		return nil, err
	}
	if !removed {
		return obj, nil
	}
	out, ok := reflect.New(t.Elem()).Interface().(client.Object)
	if !ok {
		return nil, fmt.Errorf("strip: new %s is not a client.Object", t.Elem())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, out); err != nil {
		return nil, fmt.Errorf("strip: convert unstructured back to %T: %w", obj, err)
	}
	return out, nil
}

// removeAll removes every path from doc, in order, and reports whether anything was removed;
// err is the context's at a step boundary (doc is then partly stripped).
func removeAll(st *stepper, doc map[string]any, paths [][]string) (removed bool, err error) {
	for _, tokens := range paths {
		if err := st.boundary(tokens); err != nil {
			return removed, err
		}
		_, ok, err := remove(st, doc, tokens)
		removed = removed || ok
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// remove removes the value at tokens (at least one) below node and returns the node to keep in
// its place (a new slice when array elements were removed; maps and the elements of arrays
// change in place) and whether a value was removed. A Wildcard step where the node is an
// array stands for each of its elements (removeElements); where it is an object it is the key
// "*". A missing key, an index out of range or not a number, or a parent that is not an object
// or array all mean that there is nothing to remove. err is the context's at a step boundary.
func remove(st *stepper, node any, tokens []string) (_ any, removed bool, err error) {
	tok, rest := tokens[0], tokens[1:]
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tok]
		if !ok {
			return node, false, nil
		}
		if len(rest) == 0 {
			delete(n, tok)
			return n, true, nil
		}
		newChild, removed, err := remove(st, child, rest)
		if removed {
			n[tok] = newChild
		}
		return n, removed, err
	case []any:
		if tok == Wildcard {
			return removeElements(st, n, rest)
		}
		i, ok := arrayIndex(tok, len(n))
		if !ok {
			return node, false, nil
		}
		if len(rest) == 0 {
			out := make([]any, 0, len(n)-1)
			out = append(out, n[:i]...)
			return append(out, n[i+1:]...), true, nil
		}
		newChild, removed, err := remove(st, n[i], rest)
		if removed {
			n[i] = newChild
		}
		return n, removed, err
	default:
		return node, false, nil
	}
}

// removeElements is remove's Wildcard step on the array n: without rest every element goes (a
// new empty array, once; an empty n is left as it is), else rest is removed from each element,
// the last first, as the paths ConcretePaths yields are.
func removeElements(st *stepper, n []any, rest []string) (_ any, removed bool, err error) {
	if len(rest) == 0 {
		if len(n) == 0 {
			return n, false, nil
		}
		return []any{}, true, nil
	}
	for i := len(n) - 1; i >= 0; i-- {
		if err := st.element(); err != nil {
			return n, removed, err
		}
		newChild, ok, err := remove(st, n[i], rest)
		if ok {
			n[i], removed = newChild, true
		}
		if err != nil {
			return n, removed, err
		}
	}
	return n, removed, nil
}

// arrayIndex parses an RFC 6901 array index (jsonscan.ArrayIndex) and checks it is below n.
// "-" (past the end) and anything else are not an element.
func arrayIndex(tok string, n int) (int, bool) {
	i, ok := jsonscan.ArrayIndex(tok)
	return i, ok && i < n
}
