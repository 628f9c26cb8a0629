package builtin

import "github.com/distribution/reference"

// StripThroughUnstructured is how the strip hook took paths off a typed object before it did
// so along the Go type: the oracle of FuzzStripTyped.
var StripThroughUnstructured = stripTyped

// ParseStripPath is parseStripPath, for the oracle's paths.
var ParseStripPath = parseStripPath

// IsImageReference reports whether s parses as a normalized image name.
func IsImageReference(s string) bool {
	_, err := reference.ParseNormalizedNamed(s)
	return err == nil
}
