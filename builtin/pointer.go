package builtin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/synchook/synchook/patch"
)

// ErrInvalidPointer is wrapped by every error about a string that is not an RFC 6901 JSON
// Pointer.
var ErrInvalidPointer = errors.New("invalid JSON Pointer")

// ErrProtectedPath is wrapped by every error about a strip path that would remove a field that
// identifies the object (apiVersion, kind, metadata.name, metadata.namespace, metadata.uid) or
// a parent of one.
var ErrProtectedPath = errors.New("protected path")

// ParsePointer splits the RFC 6901 JSON Pointer s into its unescaped reference tokens ("~1"
// becomes "/", "~0" becomes "~"). s must be "" (the whole document, no tokens) or start with
// "/", and "~" may only appear as "~0" or "~1". Errors wrap ErrInvalidPointer and quote s.
func ParsePointer(s string) ([]string, error) {
	if s == "" {
		return []string{}, nil
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("%w %q: must be empty or start with \"/\"", ErrInvalidPointer, s)
	}
	raw := strings.Split(s[1:], "/")
	tokens := make([]string, len(raw))
	for i, tok := range raw {
		for j := 0; j < len(tok); j++ {
			if tok[j] != '~' {
				continue
			}
			if j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1') {
				return nil, fmt.Errorf("%w %q: \"~\" must be followed by 0 or 1 (write \"~0\" for \"~\" and \"~1\" for \"/\")", ErrInvalidPointer, s)
			}
			j++
		}
		// RFC 6901 order: "~1" first, then "~0", so that "~01" becomes "~1", not "/".
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

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
