// Package engine runs hook chains: a Registry describes which hooks (package hooks) run for
// which GVK and hook type, in registration order; a Runner executes one chain per request on
// the JSON of one object and returns the RFC 6902 JSON Patch from the request object to the
// hooked one. It reads the request's bytes once into a record (package intake), chooses one plan
// from the chain's capabilities and the record before any hook runs (plan.go; Explain prints
// it), decodes at most once (package decode), runs the hooks, encodes once and diffs; it guards identity
// (apiVersion, kind, name, namespace, uid), asks package undo for automatic undo (undo.go:
// the write plan applied before a write, the record after the compare, the read plan applied
// on a read), marks provenance, bounds concurrency and deadlines, withholds hook text on
// Secrets and names each failure (package failure), and refuses ambiguous input. It speaks no transport: webhook (AdmissionReview),
// internal/bridge and internal/bridgev2 (vcluster plugins v1 and v2) and hookclient call a
// Runner.
package engine
