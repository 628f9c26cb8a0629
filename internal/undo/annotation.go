package undo

// Writing the Annotation: each form of the object a write path holds gets the sealed value
// from one function here (a JSON Patch, a Doc, a labels/annotations map), each putting it
// where the others do: in metadata.annotations, making that map (and metadata) where the
// object has none.

import (
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// Marker is how a JSON object that carries an Annotation contains its key: a cheap test
// before looking for it.
var Marker = []byte(`"` + Annotation + `"`)

// AnnotationIn returns the value of the Annotation in the JSON metadata object meta.
func AnnotationIn(meta []byte) (string, bool) {
	ann, _, ok := jsonscan.Find(meta, "annotations")
	if !ok {
		return "", false
	}
	m, _, ok := jsonscan.Find(ann.Value, Annotation)
	if !ok {
		return "", false
	}
	return annotationValue(m.Value)
}

// annotationValue is encoding/json's Unmarshal of the value v into a string, without its
// reflection for the sealed value's plain text (jsonscan.String): null is "", any value that
// is no string literal is refused.
func annotationValue(v []byte) (string, bool) {
	if string(v) == "null" {
		return "", true
	}
	return jsonscan.String(v)
}

// AnnotationOp returns the JSON Patch operation that writes the Annotation value on an object
// whose metadata (hasMeta: present) holds annotations (nil: none): an add to the map where
// there is one, else an add of the map, else of metadata.
func AnnotationOp(meta []byte, hasMeta bool, annotations []byte, value string) patch.Operation {
	switch {
	case len(annotations) > 0 && annotations[0] == '{':
		return patch.Operation{Operation: "add", Path: "/metadata/annotations/synchook.io~1undo", Value: value}
	case hasMeta && len(meta) > 0 && meta[0] == '{':
		return patch.Operation{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{Annotation: value}}
	}
	return patch.Operation{Operation: "add", Path: "/metadata", Value: map[string]any{"annotations": map[string]string{Annotation: value}}}
}

// SetAnnotation sets the Annotation to value on doc, making the annotations map when it is
// absent (or not a map); false when metadata is not an object.
func SetAnnotation(doc Doc, value string) bool {
	if k, ok := doc.Kind([]string{"metadata"}); !ok || k != '{' {
		return false
	}
	if k, ok := doc.Kind([]string{"metadata", "annotations"}); ok && k == '{' {
		ok, err := doc.Set(annotationTokens, value)
		return ok && err == nil
	}
	ok, err := doc.Set([]string{"metadata", "annotations"}, map[string]any{Annotation: value})
	return ok && err == nil
}

// SetIn sets the Annotation to value in the annotations map ann, making it when nil, and
// returns it.
func SetIn(ann map[string]string, value string) map[string]string {
	if ann == nil {
		ann = map[string]string{}
	}
	ann[Annotation] = value
	return ann
}
