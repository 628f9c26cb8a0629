// Package undo is synchook's automatic undo, one room: the entries a write records and how a
// change becomes them (Entry, Record, RecordOps, RecordMaps, the empty-map rule), the
// identity a seal is bound to (IdentityIn, SubjectOf), how entries are sealed into the
// synchook.io/undo annotation with a key only synchook holds (Ring, Rule.Seal, Open) and how
// that annotation is written (annotation.go), which of them a read may apply once the hook
// that wrote them is no longer configured (Restorable), `synchook cleanup`'s plan and result
// (Rule.Cleanup), the reserved annotations (Reserved) and the bounds (DefaultMaxBytes,
// ErrTooLarge). The engine asks it three things: the write plan applied before a write
// (Rule.Rewrite), the record after the compare (RecordOps, RecordMaps, sealed by Rule.Seal),
// and the read plan applied on a read (Plan.Read, Plan.ViewMaps); what it cannot open is
// told to a RejectedObserver, what an applied undo left out to a SkippedObserver.
//
// # The one rule
//
// An undo is applied only if it is sealed and opens under synchook's key, bound to the object
// it was written for — on reads (Rule.PlanRead), on an Update's own-undo step (Rule.PlanWrite)
// and in cleanup (Rule.PlanCleanup); Apply is the one applier of what a plan admits, onto the
// object as the host stored it (a parent the apiserver dropped is made again, an element the
// host added again is not inserted twice, an entry left out is counted by reason). Anything
// else in the Annotation (clear text, a value that does not open) is tenant data: never
// applied (Plan.Reason says why).
//
// # Sealed format
//
// A sealed annotation value is
//
//	s2.<binding>.<key ID>.<base64url, no padding: nonce (12 bytes) || AES-256-GCM ciphertext and tag>
//
// The plaintext is the JSON of a Record: {"w":["<hook fingerprint>",...],"e":[<Entry>...]}. The
// additional data is the object's identity (apiVersion, kind, namespace, name), its side
// (physical or virtual) and, as the binding letter says, its uid (u: where one exists), only
// its name (n: a Create before the apiserver gives a uid; the next write seals with the uid)
// or its generateName (g: a Create with no name yet; it opens only on an object whose name has
// that prefix). So a sealed value copied to another object, another kind, the other cluster
// or a re-created object of the same name never opens. Sealing is deterministic (a synthetic
// IV, as in RFC 5297's SIV mode): the nonce is the first 12 bytes of HMAC-SHA256, under a
// second key, of the additional data and the plaintext, so the same object and undo always
// give the same bytes and a reconcile that changes nothing writes nothing. Each key of a Ring
// is 64 random bytes: 32 for AES-256-GCM, 32 for the HMAC.
//
// Values of earlier builds, "s1.<key ID>.<...>", are bound to the name only: they open on the
// physical side until the object's next write (which seals it s2), never on the virtual side,
// where the tenant holds the objects.
//
// Entries carry an optional "op" for kinds of entry added later (array inserts and removes);
// a reader that meets an op it does not know refuses the whole record (ErrMalformed), so an
// older build never half-applies a newer undo.
//
// # Key ring text
//
// A Ring is stored (in the managed key Secret's "keys" item, or a file given with
// --undo-key-file) as text, one key per line, oldest first:
//
//	<key ID> <base64 (standard, padded) of 64 bytes>
//
// Blank lines and lines starting with "#" are ignored. The last key seals; every key opens.
//
// The package does no I/O and knows nothing of hooks: package engine records entries
// (Entries, EntriesOf), seals them and asks it what to apply; internal/cleanup takes its
// reasons; internal/undokey keeps a Ring in a Secret.
package undo
