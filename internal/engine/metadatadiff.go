package engine

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/metamap"
	"github.com/synchook/synchook/patch"
)

// metadataOps returns the JSON Patch from raw to after (the JSON of out) when the two differ
// only in metadata.labels and metadata.annotations, the typical hook's whole change; ok is
// false when they differ anywhere else, and the caller then diffs the typed round trip of raw
// (before) against after and rebases that onto raw.
//
// raw is the request's own JSON, so the operations apply to it as they are, without a rebase,
// and without an encoding of before. An operation that only undoes a difference of form between
// raw and the typed round trip (an escaped string, a label map written as null or {}) is
// dropped: every kept operation changes an entry whose value before the hooks differs from
// after, so fields the hooks did not change are never rewritten.
//
// before and out must be typed objects: the maps of an Unstructured may hold what GetLabels
// drops.
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
