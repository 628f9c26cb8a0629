// Package hookclient is the syncer side of synchook: a client that sends objects to the
// sidecar before the syncer writes them and after it reads them, and applies the JSON Patch
// that comes back.
//
// A Client talks to one sidecar: it POSTs admission.k8s.io/v1 AdmissionReviews to
// /mutate/{hookType} over HTTPS (HTTP/1.1 with keep-alive, which is faster than HTTP/2 for
// this loopback traffic), trusts the CA in a PEM file and re-reads that file when it changes,
// so a rotated CA is picked up without a restart. It reads GET /capabilities on first use and
// again every CapabilitiesInterval, so a (GVK, hook type) without hooks costs no request at
// all. The patch is applied to the object's JSON and the result is decoded into a fresh object
// of the same type that then replaces the caller's object, so a hook that removes a field
// really removes it.
//
// Wrap turns any controller-runtime client.Client into a hooked one for one side of the sync:
// Physical (the host cluster) or Virtual (the tenant cluster). Get and List run Get hooks
// after the read (a List is one request for all items: the List object itself is sent and the
// patch paths index into /items/N); Create, Update, Patch and Delete, and writes through
// Status(), run the matching hook type before the write. Kinds without hooks go straight
// through.
//
// Failure policy: per hook type, Fail (do not write; the default for Create, Update and
// Delete) or Ignore (go on with the unmutated object; the default for Get), as in a
// MutatingWebhookConfiguration. Ignore only covers the sidecar being unreachable or failing at
// the transport level; a hook that refuses an object (allowed: false) is an error under both
// policies. A request is retried only when it provably never reached the sidecar (the
// connection could not be opened, or the server presented a certificate from a CA that was
// just rotated in the CA file).
//
// This package does not watch or cache objects, does not run hooks itself (use the hooks
// package in-process for that), and does not support server-side apply (Apply) or
// DeleteAllOf on hooked kinds: those return an error wrapping ErrUnsupported.
package hookclient
