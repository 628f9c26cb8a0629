package builtin

import (
	"errors"
	"fmt"
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

// ExpandPath returns the concrete paths that tokens addresses in a document whose arrays have
// the lengths lenAt gives (lenAt(prefix): the length of the array at prefix, false where the
// value there is not an array): each Wildcard step where an array is becomes each of its
// indexes, the last first, so that removing the paths in the order given never shifts an index
// still to come. A Wildcard step where no array is stays the literal key "*". A path without a
// Wildcard step is returned as it is; an empty array gives no path.
func ExpandPath(tokens []string, lenAt func(prefix []string) (int, bool)) [][]string {
	var out [][]string
	expandFrom(tokens, 0, lenAt, &out)
	return out
}

// expandFrom appends to out the expansions of tokens' Wildcard steps from step from on.
func expandFrom(tokens []string, from int, lenAt func([]string) (int, bool), out *[][]string) {
	for i := from; i < len(tokens); i++ {
		if tokens[i] != Wildcard {
			continue
		}
		n, isArray := lenAt(tokens[:i])
		if !isArray {
			continue // the literal key
		}
		for j := n - 1; j >= 0; j-- {
			concrete := slices.Clone(tokens)
			concrete[i] = strconv.Itoa(j)
			expandFrom(concrete, i+1, lenAt, out)
		}
		return
	}
	*out = append(*out, tokens)
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
