package undo

// The reserved annotations: Annotation and ProvenanceAnnotation are synchook's alone. A write
// chain takes what an object brings of them off before its hooks run (DropReserved), and the
// removal is part of the recorded undo, so the reader gets the tenant's value back.

import (
	"encoding/json"
	"slices"

	"github.com/synchook/synchook/internal/jsonscan"
)

// ProvenanceAnnotation lists the hooks that changed an object (engine.RegistryOptions.Provenance):
// "hook@version#sha" per hook, comma-separated, in chain order; sha is the first 8 hex digits
// of the SHA-256 of the hook's own JSON Patch, so the same change always has the same sha.
const ProvenanceAnnotation = "synchook.io/mutated-by"

// Reserved are the annotations that are synchook's alone on an object, in the order a write
// chain takes them off.
var Reserved = [...]string{Annotation, ProvenanceAnnotation}

// reservedPaths are the JSON Pointers of the Reserved annotations.
var reservedPaths = [...]string{jsonscan.Join("/metadata/annotations", Reserved[0]), jsonscan.Join("/metadata/annotations", Reserved[1])}

// DropReserved deletes the reserved annotations from ann and reports whether there were any.
func DropReserved(ann map[string]string) bool {
	found := false
	for _, k := range Reserved {
		if _, ok := ann[k]; ok {
			delete(ann, k)
			found = true
		}
	}
	return found
}

// IsReservedPath reports whether p is the JSON Pointer of a reserved annotation.
func IsReservedPath(p string) bool {
	return slices.Contains(reservedPaths[:], p)
}

// OnlyReserved reports whether the JSON Patch p changes nothing but the reserved annotations:
// the removal of what a tenant wrote there and the undo that records it (no change of the
// hooks, however often the tenant's object comes). meta is the sent object's metadata (JSON):
// a removal of the whole annotations map (a typed chain's diff, where the tenant's reserved
// keys were all it held) is reserved only when the sent map held nothing else.
func OnlyReserved(p, meta []byte) bool {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(p, &ops) != nil || len(ops) == 0 {
		return false
	}
	for _, op := range ops {
		switch {
		case IsReservedPath(op.Path):
		case op.Path == "/metadata/annotations" && op.Op == "remove":
			var sent struct {
				Annotations json.RawMessage `json:"annotations"`
			}
			if json.Unmarshal(meta, &sent) != nil || !reservedKeysOnly(sent.Annotations) {
				return false
			}
		case op.Path == "/metadata/annotations": // a map made for the undo alone
			if !reservedKeysOnly(op.Value) {
				return false
			}
		case op.Path == "/metadata":
			var meta map[string]json.RawMessage
			if json.Unmarshal(op.Value, &meta) != nil || len(meta) != 1 || !reservedKeysOnly(meta["annotations"]) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// reservedKeysOnly reports whether v is a JSON object whose keys are all reserved annotations.
func reservedKeysOnly(v json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return false
	}
	for k := range m {
		if !slices.Contains(Reserved[:], k) {
			return false
		}
	}
	return true
}
