package undo

// Writing the Annotation: each form of the object a write path holds gets the sealed value
// from one function here (the encoding's bytes, a JSON Patch, a Doc, a labels/annotations
// map), each putting it where the others do: in metadata.annotations, making that map (and
// metadata) where the object has none.

import (
	"bytes"
	"encoding/json"

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
	var s string
	if json.Unmarshal(m.Value, &s) != nil {
		return "", false
	}
	return s, true
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

// SpliceAnnotation returns the JSON object doc (an encoding of a typed object, whose metadata
// is an object) with the Annotation set to value as its annotations' first member (or a new
// annotations map), nil when doc's metadata cannot be found as an object, already has the key
// or holds annotations that are not a map.
func SpliceAnnotation(doc []byte, value string) []byte {
	var meta []byte
	metaAt := -1
	jsonscan.ScanObject(doc, func(k, rest []byte) int {
		n := jsonscan.SkipValue(rest, 0)
		if string(k) == `"metadata"` && n > 0 {
			meta, metaAt = rest[:n], len(doc)-len(rest)
			return -1 // found: stop
		}
		return n
	})
	if metaAt < 0 || len(meta) == 0 || meta[0] != '{' {
		return nil
	}
	member := jsonscan.AppendString(nil, Annotation)
	member = append(member, ':')
	member = jsonscan.AppendString(member, value)
	at, insert := metaAt+1, []byte(nil) // where, and what, to insert
	if m, _, ok := jsonscan.Find(meta, "annotations"); ok && len(m.Value) > 0 && m.Value[0] == '{' {
		if _, _, has := jsonscan.Find(m.Value, Annotation); has {
			return nil
		}
		at = metaAt + m.End - len(m.Value) + 1 // just past the map's opening brace
		insert = member
		if len(bytes.TrimSpace(m.Value[1:len(m.Value)-1])) > 0 {
			insert = append(insert, ',')
		}
	} else if ok {
		return nil // annotations null or not a map: the caller takes the whole compare
	} else {
		insert = append([]byte(`"annotations":{`), member...)
		insert = append(insert, '}')
		if len(bytes.TrimSpace(meta[1:len(meta)-1])) > 0 {
			insert = append(insert, ',')
		}
	}
	out := make([]byte, 0, len(doc)+len(insert))
	out = append(out, doc[:at]...)
	out = append(out, insert...)
	return append(out, doc[at:]...)
}
