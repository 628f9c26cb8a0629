// Package undokey keeps synchook's undo key ring (package undo) where every replica and every
// later process finds it: in a file (LoadFile: the "keys" item of a mounted Secret, given with
// --undo-key-file) or in a Secret in the host namespace that synchook manages itself (Start).
//
// # The managed Secret
//
// The Secret (default name DefaultSecretName, type Opaque) holds two items:
//
//	keys   the ring in the key ring text format of package undo, oldest key first
//	kinds  one undo.Kind per line ("v1/Pod physical"): the kinds an undo was sealed on, whose
//	       reads must stay announced to the syncer after a restart (Registry.CoverUndoReads)
//
// Start reads the Secret, or creates it with a new ring when it is absent; several replicas
// starting at once all end with the keys of the one whose create won. A Manager then keeps the
// Secret and the undo.Keeper in step until its context ends: it adds the kinds the Keeper
// learns, writes the Secret back from memory when someone deleted it (the same keys, never a
// new one), and takes up keys another replica added (Rotate). Keys and kinds are only ever
// added: every update is the union of what is stored and what is in memory, so no replica
// drops what another wrote, and an undo sealed with any key the process has used still opens.
//
// Secret values never appear in errors or logs: both name the Secret and key IDs only.
//
// The package does not retire keys (remove old ones once no object carries an undo sealed
// with them), watch the Secret (it polls every Options.ResyncPeriod), or announce kinds learnt
// after start: the caller covers SealedKinds once, before it serves.
package undokey
