// Package metamap names the two string maps of every object's metadata that hooks most often
// change, labels and annotations, and finds them in JSON Pointers; the chain's label diff and
// the client's direct label apply share it.
package metamap

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/patch"
)

// Map names one of the two string maps of every object's metadata that hooks most
// often change.
type Map int

const (
	// Labels is metadata.labels.
	Labels Map = iota
	// Annotations is metadata.annotations.
	Annotations
)

// Get returns the map m of obj.
func (m Map) Get(obj metav1.Object) map[string]string {
	if m == Labels {
		return obj.GetLabels()
	}
	return obj.GetAnnotations()
}

// Set sets the map m of obj.
func (m Map) Set(obj metav1.Object, v map[string]string) {
	if m == Labels {
		obj.SetLabels(v)
	} else {
		obj.SetAnnotations(v)
	}
}

// Target reports whether the JSON Pointer path points to metadata.labels or
// metadata.annotations (whole = true) or to one entry of them (key, unescaped).
func Target(path string) (m Map, key string, whole, ok bool) {
	if !strings.HasPrefix(path, "/metadata/") {
		return 0, "", false, false
	}
	tokens, err := patch.ParsePointer(path)
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
