package builtin

import (
	"slices"

	"github.com/distribution/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StripThroughUnstructured is how the strip hook took paths off a typed object before it did
// so along the Go type: the oracle of FuzzStripTyped.
// It is stripThrough without step boundaries.
func StripThroughUnstructured(obj client.Object, paths [][]string) (client.Object, error) {
	return stripThrough(nil, obj, paths)
}

// ExpandPath returns the paths ConcretePaths yields, each a copy of its own.
func ExpandPath(tokens []string, lenAt func(prefix []string) (int, bool)) [][]string {
	var out [][]string
	for concrete := range ConcretePaths(tokens, lenAt) {
		out = append(out, slices.Clone(concrete))
	}
	return out
}

// ParseStripPath is parseStripPath, for the oracle's paths.
var ParseStripPath = parseStripPath

// IsImageReference reports whether s parses as a normalized image name.
func IsImageReference(s string) bool {
	_, err := reference.ParseNormalizedNamed(s)
	return err == nil
}
