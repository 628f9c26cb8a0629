package builtin

import (
	"errors"
	"fmt"

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
