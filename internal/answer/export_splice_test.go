package answer

import (
	"reflect"

	"github.com/synchook/synchook/patch"
)

// SplicedByHand reports whether Splice splices ops into raw by hand (not through the Doc).
func SplicedByHand(t reflect.Type, raw []byte, ops []patch.Operation) bool {
	_, ok := spliceInto(t, raw, nil, nil, ops)
	return ok
}
