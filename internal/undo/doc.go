// Package undo is synchook's automatic undo as data: the entries a write chain records (Entry,
// Record), how they are sealed into the synchook.io/undo annotation with a key only synchook
// holds (Ring, Seal, Open), which of them a read may apply once the hook that wrote them is no
// longer configured (Restorable), and the bounds (DefaultMaxBytes).
//
// # Sealed format
//
// A sealed annotation value is
//
//	s1.<key ID>.<base64url, no padding: nonce (12 bytes) || AES-256-GCM ciphertext and tag>
//
// The plaintext is the JSON of a Record: {"w":["<hook fingerprint>",...],"e":[<Entry>...]}. The additional
// data is the object's identity (apiVersion, kind, namespace, name) and its side (physical or
// virtual), so a sealed value copied to another object, another kind or the other cluster
// never opens. Sealing is deterministic (a synthetic IV, as in RFC 5297's SIV mode): the nonce
// is the first 12 bytes of HMAC-SHA256, under a second key, of the additional data and the
// plaintext, so the same object and undo always give the same bytes and a reconcile that
// changes nothing writes nothing. Each key of a Ring is 64 random bytes: 32 for AES-256-GCM,
// 32 for the HMAC.
//
// Entries carry an optional "op" for kinds of entry added later (array inserts and removes);
// a reader that meets an op it does not know refuses the whole record (ErrMalformed), so an
// older build never half-applies a newer undo.
//
// A value without the "s1." prefix is a clear-text undo (a JSON array of Entry), written by
// releases before sealing and by synchook without a key; package engine decides when such a
// value may be trusted.
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
// The package does no I/O and knows nothing of hooks: package engine calls it, and
// internal/undokey keeps a Ring in a Secret.
package undo
