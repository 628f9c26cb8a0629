package undo

import "k8s.io/apimachinery/pkg/runtime/schema"

// Restorable reports whether an entry at the JSON Pointer reference tokens may be applied to a
// read view of an object of kind gvk when the write chain configured now would not put the
// hooks' change back on the next write (the hook was removed, changed or upgraded, or the kind
// has no Update chain).
//
// vcluster writes host objects by Update (PUT) of the read view plus the tenant's change, so
// a view may leave out only what the apiserver lets the syncer change on an update: the
// object's labels and annotations on every kind, and the data of Secrets and ConfigMaps. A
// Pod's spec (tolerations, nodeSelector, …) and most other fields are immutable or
// validated against the stored object: a view without the hook's value there would make
// every later update of the object fail. Such an entry is left on the object (the tenant sees
// the old hook value) and `synchook cleanup` lists it as not restorable.
//
// An immutable Secret or ConfigMap (immutable: true) refuses data changes too; the caller
// checks that on the object (Immutable).
func Restorable(gvk schema.GroupVersionKind, tokens []string) bool {
	if len(tokens) >= 2 && tokens[0] == "metadata" && (tokens[1] == "labels" || tokens[1] == "annotations") {
		return true
	}
	if gvk.Group == "" && gvk.Version == "v1" && (gvk.Kind == "Secret" || gvk.Kind == "ConfigMap") && len(tokens) >= 1 {
		switch tokens[0] {
		case "data", "stringData", "binaryData":
			return true
		}
	}
	return false
}
