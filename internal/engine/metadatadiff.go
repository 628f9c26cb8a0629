package engine

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/metamap"
	"github.com/synchook/synchook/patch"
)

// metadataOps returns the JSON Patch from raw to after (the JSON of out) when the two differ
// only in metadata.labels and metadata.annotations; ok is false otherwise. It diffs raw itself
// (no rebase) and drops an operation that only undoes a difference of form between raw and the
// typed round trip (an escaped string, a map written as null or {}): every kept operation
// changes an entry whose value before the hooks (before) differs from out's. before and out must
// be typed objects (an Unstructured's maps may hold what GetLabels drops).
func metadataOps(raw, after []byte, before, out client.Object) ([]patch.Operation, bool) {
	ops := patch.DiffMarshaled(raw, after)
	kept := ops[:0]
	for _, op := range ops {
		m, key, whole, ok := metamap.Target(op.Path)
		if !ok {
			return nil, false
		}
		b, a := m.Get(before), m.Get(out)
		if whole {
			if len(b) == 0 && len(a) == 0 || maps.Equal(b, a) {
				continue
			}
		} else {
			bv, had := b[key]
			av, has := a[key]
			if had == has && bv == av {
				continue
			}
		}
		kept = append(kept, op)
	}
	if len(kept) == 0 {
		return nil, true
	}
	return kept, true
}
