// Package webhook serves an engine.Registry over HTTPS the way a Kubernetes mutating admission
// webhook is served, on controller-runtime's webhook server.
//
// Endpoints (see Server.Handler):
//
//	POST /mutate/{hookType}  admission.k8s.io/v1 AdmissionReview in, AdmissionReview out
//	GET  /capabilities       engine.Capabilities as JSON
//	GET  /healthz, /readyz   controller-runtime healthz handlers: checks ping and hook-slots
//
// The same /healthz and /readyz are also served on a separate plain-HTTP probe address, because
// kubelet probes reach the pod IP and the webhook listens on 127.0.0.1 by default
// (Server.ProbeHandler). The hook-slots check fails while every concurrency slot of the Runner
// has been held longer than Options.StuckSlotsFactor × RequestTimeout by hooks that ignore their
// context (metrics.SlotCheck), so that kubelet restarts the process; /readyz/hook-slots tells how
// many slots are held, since when and by which hooks.
//
// Response codes of /mutate/{hookType}:
//
//	HTTP 200  an AdmissionReview; response.allowed=true with patchType JSONPatch and patch when a
//	          hook changed the object (no patch when nothing changed); allowed=false with
//	          status.code and a message naming the hook when a hook failed (403 refused,
//	          422 protected field, 500 panic or wrong kind, 504 deadline)
//	HTTP 400  the body is not an admission.k8s.io/v1 AdmissionReview with a request
//	HTTP 404  unknown hook type in the path (the message lists the valid ones)
//	HTTP 405  not a POST
//	HTTP 413  the body is larger than Options.MaxRequestBytes; it is not read further
//	HTTP 429  every hook-chain slot is busy (engine.RunnerOptions.MaxConcurrent); Retry-After: 1
//
// The hooks run on request.object, or on request.oldObject for a DELETE (the object being
// deleted). For an UPDATE to an Update* hook type, request.oldObject (the stored object) is also
// handed to the hooks, undecoded (engine.MutateOptions.OldObject: hooks.OldObject,
// hooks.DecodeOldObject; a MutatingAdmissionPolicy's CEL oldObject); it is never patched. A
// malformed one (not a JSON object of the request's kind, or one that does not decode where a
// hook reads it) is answered with status.code 400 and a message that starts with
// "request.oldObject:", as a malformed object is with 400.
//
// The package does not create certificates (see package certs) and does not decide what a
// caller does when the sidecar fails (that is the caller's failure policy).
package webhook
