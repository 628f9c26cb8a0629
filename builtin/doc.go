// Package builtin holds the hooks that ship in the synchook binary and can be enabled from
// config alone: Labels (add or overwrite labels and annotations) and Strip (remove fields by
// JSON Pointer).
//
// Both work on any kind: a typed object (e.g. *corev1.Pod) when the scheme knows the kind, or
// an *unstructured.Unstructured for custom resources. The mutate functions are built once from
// their settings (LabelsFunc, StripFunc), optionally limited to some objects (Filtered), and
// turned into a hook for one resource and a set of hook types with hooks.NewFunc. The functions keep no
// state between calls and are safe for concurrent use.
package builtin
