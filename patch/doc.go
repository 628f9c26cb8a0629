// Package patch creates, applies and guards RFC 6902 JSON Patches
// (https://www.rfc-editor.org/rfc/rfc6902).
//
// Patches are created with gomodules.xyz/jsonpatch/v2 (the library controller-runtime's
// admission responses use) and applied with github.com/evanphx/json-patch/v5. Guard rejects
// operations on the fields that identify an object. Rebase moves a patch computed between two
// normalised documents onto the raw document a caller sent, so that fields the normalisation
// dropped (unknown to the compiled types) are never touched.
//
// The package does not know about hooks or Kubernetes types; it works on JSON bytes.
package patch
