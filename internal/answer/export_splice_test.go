package answer

import "github.com/synchook/synchook/patch"

// SplicedByHand reports whether Splice splices ops into raw by hand (not through the Doc).
func SplicedByHand(raw []byte, ops []patch.Operation) bool {
	_, ok := spliceInto(raw, ops)
	return ok
}
