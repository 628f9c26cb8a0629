package builtin

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"reflect"
	"slices"
	"strconv"

	"github.com/synchook/synchook/internal/jsonfield"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// ErrInvalidPointer is wrapped by every error about a string that is not an RFC 6901 JSON
// Pointer: patch.ErrInvalidPointer.
var ErrInvalidPointer = patch.ErrInvalidPointer

// ErrProtectedPath is wrapped by every error about a strip path that would remove a field that
// identifies the object (apiVersion, kind, metadata.name, metadata.namespace, metadata.uid) or
// a parent of one.
var ErrProtectedPath = errors.New("protected path")

// ParsePointer is patch.ParsePointer: it splits an RFC 6901 JSON Pointer into its unescaped
// reference tokens. Errors wrap ErrInvalidPointer and quote s.
func ParsePointer(s string) ([]string, error) { return patch.ParsePointer(s) }

// CheckStripPath returns an error unless s can be used as a Strip path: it must be a valid JSON Pointer
// (ParsePointer) and must not point to a field that identifies the object, or to one of its
// parents ("" and "/metadata" included). Errors wrap ErrInvalidPointer or ErrProtectedPath and
// quote s.
func CheckStripPath(s string) error {
	_, err := parseStripPath(s)
	return err
}

// parseStripPath is CheckStripPath that also returns the tokens.
func parseStripPath(s string) ([]string, error) {
	tokens, err := ParsePointer(s)
	if err != nil {
		return nil, err
	}
	if field := patch.ProtectedField(s); field == s {
		return nil, fmt.Errorf("%w: JSON Pointer %q identifies the object and cannot be stripped", ErrProtectedPath, s)
	} else if field != "" {
		return nil, fmt.Errorf("%w: JSON Pointer %q would also remove %s, which identifies the object", ErrProtectedPath, s, field)
	}
	return tokens, nil
}

// Wildcard is the strip path step that stands for every element where the value is an array;
// where the value is an object it is the literal key "*". RFC 6901's array steps are digits or
// "-", so the two never clash. Only config paths (strip) interpret it: undo entries and
// patches hold concrete paths.
const Wildcard = "*"

// hasWildcard reports whether tokens has a Wildcard step.
func hasWildcard(tokens []string) bool { return slices.Contains(tokens, Wildcard) }

// ConcretePaths yields the concrete paths that tokens addresses in a document whose arrays have
// the lengths lenAt gives (lenAt(prefix): the length of the array at prefix, false where the
// value there is not an array): each Wildcard step where an array is becomes each of its
// indexes, the last first, so that removing the paths in the order given never shifts an index
// still to come. A Wildcard step where no array is stays the literal key "*". A path without a
// Wildcard step is yielded as it is; an empty array gives no path. It asks lenAt for the length
// of an array only when it gets there, so the loop may remove each path before the next is
// made (what it removes is inside an element whose paths are all done, or is that element,
// after every index still to come). The slice yielded is reused for the next path: copy it to
// keep it.
func ConcretePaths(tokens []string, lenAt func(prefix []string) (int, bool)) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		if !hasWildcard(tokens) {
			yield(tokens)
			return
		}
		concreteFrom(slices.Clone(tokens), 0, lenAt, yield)
	}
}

// concreteFrom yields the concrete paths of buf (a path whose steps before from are concrete)
// with its Wildcard steps from step from on replaced, and reports false once yield did. It
// leaves buf as it was given.
func concreteFrom(buf []string, from int, lenAt func([]string) (int, bool), yield func([]string) bool) bool {
	for i := from; i < len(buf); i++ {
		if buf[i] != Wildcard {
			continue
		}
		n, isArray := lenAt(buf[:i])
		if !isArray {
			continue // the literal key
		}
		for j := n - 1; j >= 0; j-- {
			buf[i] = strconv.Itoa(j)
			if !concreteFrom(buf, i+1, lenAt, yield) {
				return false
			}
		}
		buf[i] = Wildcard
		return true
	}
	return yield(buf)
}

// CheckStripPathFor is CheckStripPath for a path stripped from objects of obj's Go type (a
// pointer to a typed object): it also refuses a step that can never match along that type —
// a Wildcard where the value is an object (a struct has no field "*"), a step that is neither
// an index nor a Wildcard where the value is an array, any step below a string, number or
// bool — naming the step. A field the type does not know (one of a newer Kubernetes) and
// anything below a value that encodes itself or an interface are not judged.
func CheckStripPathFor(obj any, s string) error {
	tokens, err := parseStripPath(s)
	if err != nil {
		return err
	}
	t := reflect.TypeOf(obj)
	bad := func(i int, why string) error {
		return fmt.Errorf("%w %q: step %d %q never matches: %s", ErrInvalidPointer, s, i+1, tokens[i], why)
	}
	for i, tok := range tokens {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if selfEncoding(t) {
			return nil
		}
		at := jsonscan.Pointer(tokens[:i])
		switch t.Kind() {
		case reflect.Struct:
			if tok == Wildcard {
				return bad(i, fmt.Sprintf("%q is an object (%s), and %q means every element of an array only", at, t, Wildcard))
			}
			f, ok := jsonfield.Named(t, tok)
			if !ok {
				return nil
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		case reflect.Slice, reflect.Array:
			if t.Elem().Kind() == reflect.Uint8 {
				return bad(i, fmt.Sprintf("%q is a string (base64 bytes)", at))
			}
			if _, isIndex := arrayIndex(tok, math.MaxInt); !isIndex && tok != Wildcard {
				return bad(i, fmt.Sprintf("%q is an array: a step there is an index or %q (every element)", at, Wildcard))
			}
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return bad(i, fmt.Sprintf("%q is a %s, with nothing below it", at, kindName(t.Kind())))
		}
	}
	return nil
}

// kindName is the JSON kind a Go scalar kind encodes as.
func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	}
	return "number"
}
