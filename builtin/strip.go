package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonfield"
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
	return func(_ context.Context, obj client.Object) (client.Object, error) {
		if u, ok := obj.(runtime.Unstructured); ok {
			content := u.UnstructuredContent()
			if removeAll(content, paths) {
				u.SetUnstructuredContent(content)
			}
			return obj, nil
		}
		root := reflect.ValueOf(obj)
		for i, tokens := range paths {
			for _, concrete := range expandIn(tokens, func(prefix []string) (int, bool) { return typedLen(root, prefix) }) {
				if !stripValue(root, concrete) {
					return stripTyped(obj, paths[i:])
				}
			}
		}
		return obj, nil
	}, nil
}

// stripValue removes the value at tokens below v (a pointer to a struct, or a value inside one)
// along its Go type. It reports false, having changed nothing, where the path goes through a
// value that only its unstructured form can address (a type that encodes itself, an interface):
// stripTyped takes those.
func stripValue(v reflect.Value, tokens []string) bool {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return true // nothing there
		}
		v = v.Elem()
	}
	if selfEncoding(v.Type()) {
		return false
	}
	tok, rest := tokens[0], tokens[1:]
	switch v.Kind() {
	case reflect.Struct:
		f, ok := jsonfield.Named(v.Type(), tok)
		if !ok {
			return true
		}
		fv := f.Value(v)
		if !fv.IsValid() {
			return true // behind a nil embedded pointer: absent
		}
		if len(rest) == 0 {
			fv.SetZero()
			return true
		}
		return stripValue(fv, rest)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String || selfEncoding(v.Type().Key()) {
			return false
		}
		key := reflect.ValueOf(tok).Convert(v.Type().Key())
		ev := v.MapIndex(key)
		if !ev.IsValid() {
			return true
		}
		if len(rest) == 0 {
			v.SetMapIndex(key, reflect.Value{})
			return true
		}
		c := reflect.New(ev.Type()).Elem() // map values cannot be changed in place
		c.Set(ev)
		if !stripValue(c, rest) {
			return false
		}
		v.SetMapIndex(key, c)
		return true
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return true // []byte is a string in JSON: nothing below it
		}
		i, ok := arrayIndex(tok, v.Len())
		if !ok {
			return true
		}
		if len(rest) == 0 {
			out := reflect.MakeSlice(v.Type(), 0, v.Len()-1)
			out = reflect.AppendSlice(out, v.Slice(0, i))
			v.Set(reflect.AppendSlice(out, v.Slice(i+1, v.Len())))
			return true
		}
		return stripValue(v.Index(i), rest)
	case reflect.Interface:
		return false
	}
	return true // a scalar: nothing below it
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
)

// selfEncoding reports whether values of t encode or decode themselves in JSON (their
// unstructured form is not their fields).
func selfEncoding(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonMarshaler) || pt.Implements(jsonMarshaler) || t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler)
}

// stripTyped removes paths from a typed object through its unstructured form.
func stripTyped(obj client.Object, paths [][]string) (client.Object, error) {
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("strip: cannot handle %T: want a pointer to a struct or an Unstructured", obj)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("strip: convert %T to unstructured: %w", obj, err)
	}
	if !removeAll(content, paths) {
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

// removeAll removes every path from doc, in order, and reports whether anything was removed.
func removeAll(doc map[string]any, paths [][]string) bool {
	removed := false
	for _, tokens := range paths {
		for _, concrete := range expandIn(tokens, func(prefix []string) (int, bool) { return treeLen(doc, prefix) }) {
			if _, ok := remove(doc, concrete); ok {
				removed = true
			}
		}
	}
	return removed
}

// expandIn is ExpandPath for a path that may have a Wildcard step; one without is returned as
// it is, without asking lenAt.
func expandIn(tokens []string, lenAt func(prefix []string) (int, bool)) [][]string {
	if !hasWildcard(tokens) {
		return [][]string{tokens}
	}
	return ExpandPath(tokens, lenAt)
}

// typedLen returns the length of the slice at prefix below v along its Go type (as stripValue
// walks it), false where there is none or the walk meets a value that encodes itself.
func typedLen(v reflect.Value, prefix []string) (int, bool) {
	for i := 0; ; i++ {
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				return 0, false
			}
			v = v.Elem()
		}
		if selfEncoding(v.Type()) {
			return 0, false
		}
		if i == len(prefix) {
			if v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8 {
				return v.Len(), true
			}
			return 0, false
		}
		switch tok := prefix[i]; v.Kind() {
		case reflect.Struct:
			f, ok := jsonfield.Named(v.Type(), tok)
			if !ok {
				return 0, false
			}
			if v = f.Value(v); !v.IsValid() {
				return 0, false
			}
		case reflect.Map:
			if v.Type().Key().Kind() != reflect.String {
				return 0, false
			}
			if v = v.MapIndex(reflect.ValueOf(tok).Convert(v.Type().Key())); !v.IsValid() {
				return 0, false
			}
		case reflect.Slice:
			j, ok := arrayIndex(tok, v.Len())
			if !ok {
				return 0, false
			}
			v = v.Index(j)
		default:
			return 0, false
		}
	}
}

// treeLen returns the length of the array at prefix in the unstructured tree doc, false where
// there is none.
func treeLen(doc map[string]any, prefix []string) (int, bool) {
	v, _ := jsondoc.LookupValue(doc, prefix)
	a, ok := v.([]any)
	return len(a), ok
}

// remove removes the value at tokens (at least one) below node and returns the node to keep in
// its place (a new slice when an array element was removed; maps change in place) and whether
// a value was removed. A missing key, an index out of range or not a number, or a parent that
// is not an object or array all mean that there is nothing to remove.
func remove(node any, tokens []string) (any, bool) {
	tok, rest := tokens[0], tokens[1:]
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tok]
		if !ok {
			return node, false
		}
		if len(rest) == 0 {
			delete(n, tok)
			return n, true
		}
		newChild, removed := remove(child, rest)
		if removed {
			n[tok] = newChild
		}
		return n, removed
	case []any:
		i, ok := arrayIndex(tok, len(n))
		if !ok {
			return node, false
		}
		if len(rest) == 0 {
			out := make([]any, 0, len(n)-1)
			out = append(out, n[:i]...)
			return append(out, n[i+1:]...), true
		}
		newChild, removed := remove(n[i], rest)
		if removed {
			n[i] = newChild
		}
		return n, removed
	default:
		return node, false
	}
}

// arrayIndex parses an RFC 6901 array index (digits, no leading zero) and checks it is below
// n. "-" (past the end) and anything else are not an element.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(tok) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i >= n {
		return 0, false
	}
	return i, true
}
