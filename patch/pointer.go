package patch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/synchook/synchook/internal/jsonscan"
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
		var ok bool
		if tokens[i], ok = jsonscan.UnescapeToken(tok); !ok {
			return nil, fmt.Errorf("%w %q: step %d %q: \"~\" must be followed by 0 or 1 (write \"~0\" for \"~\" and \"~1\" for \"/\")", ErrInvalidPointer, s, i+1, tok)
		}
	}
	return tokens, nil
}
