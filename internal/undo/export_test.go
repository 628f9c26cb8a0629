package undo

import "testing"

// SealUnsourced seals rec as builds before Identity.UIDSource did: BindUID with the uid's
// additional data without its source.
func SealUnsourced(t testing.TB, r *Ring, id Identity, side Side, rec Record) string {
	t.Helper()
	v, err := r.seal(id, side, rec, BindUID, bindUIDUnsourced)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// SealUntimed seals rec bound to id's name without the time of sealing, as builds before
// Record.Sealed did.
func SealUntimed(t testing.TB, r *Ring, id Identity, side Side, rec Record) string {
	t.Helper()
	v, err := r.seal(id, side, rec, BindName, BindName)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
