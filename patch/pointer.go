package patch

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidPointer is wrapped by every error about a string that is not an RFC 6901 JSON
// Pointer.
var ErrInvalidPointer = errors.New("invalid JSON Pointer")

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
