// Package engine runs hook chains: a Registry describes which hooks (package hooks) run for
// which GVK and hook type, in registration order; a Runner executes one chain per request on
// the JSON of one object and returns the RFC 6902 JSON Patch from the request object to the
// hooked one. It decodes once, runs the hooks, encodes once and diffs; it guards identity
// (apiVersion, kind, name, namespace, uid), records automatic undo and asks package undo what a read may apply (undo.go, sealed.go),
// marks provenance, bounds concurrency and deadlines, withholds hook text on Secrets, and
// refuses ambiguous input. It speaks no transport: webhook (AdmissionReview), internal/bridge
// and internal/bridgev2 (vcluster plugins v1 and v2) and hookclient call a Runner.
package engine
