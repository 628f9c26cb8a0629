// Package patch creates, applies and guards RFC 6902 JSON Patches
// (https://www.rfc-editor.org/rfc/rfc6902) and parses RFC 6901 JSON Pointers.
//
// Diff creates a patch structurally from two JSON documents (fuzzed against applying it);
// Apply applies one with github.com/evanphx/json-patch/v5; Operation is gomodules.xyz/jsonpatch's
// operation type, the one controller-runtime's admission responses use. GuardDocuments rejects
// operations on the fields that identify an object. Rebase moves a patch computed between two
// normalised documents onto the raw document a caller sent, so that fields the normalisation
// dropped (unknown to the compiled types) are never touched.
//
// The package exports patches only: it does not know about hooks or Kubernetes types (but one:
// DiffTyped compares maps of resource.Quantity, the ResourceLists of every container, without
// reflection), and its JSON reading is internal/jsonscan's.
package patch
