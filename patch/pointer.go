package patch

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// MetadataMap names one of the two string maps of every object's metadata that hooks most
// often change.
type MetadataMap int

const (
	// Labels is metadata.labels.
	Labels MetadataMap = iota
	// Annotations is metadata.annotations.
	Annotations
)

// Get returns the map m of obj.
func (m MetadataMap) Get(obj metav1.Object) map[string]string {
	if m == Labels {
		return obj.GetLabels()
	}
	return obj.GetAnnotations()
}

// Set sets the map m of obj.
func (m MetadataMap) Set(obj metav1.Object, v map[string]string) {
	if m == Labels {
		obj.SetLabels(v)
	} else {
		obj.SetAnnotations(v)
	}
}

// MetadataMapTarget reports whether the JSON Pointer path points to metadata.labels or
// metadata.annotations (whole = true) or to one entry of them (key, unescaped).
func MetadataMapTarget(path string) (m MetadataMap, key string, whole, ok bool) {
	if !strings.HasPrefix(path, "/metadata/") {
		return 0, "", false, false
	}
	tokens, err := ParsePointer(path)
	if err != nil || len(tokens) < 2 || len(tokens) > 3 {
		return 0, "", false, false
	}
	switch tokens[1] {
	case "labels":
		m = Labels
	case "annotations":
		m = Annotations
	default:
		return 0, "", false, false
	}
	if len(tokens) == 2 {
		return m, "", true, true
	}
	return m, tokens[2], false, true
}
