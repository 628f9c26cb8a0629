package undo

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
)

// ReservedPrefix starts the annotations that are synchook's own (Annotation, the engine's
// provenance annotation); `synchook cleanup` removes every annotation with it.
const ReservedPrefix = "synchook.io/"

// CleanupResult is what Cleanup makes of one stored object.
type CleanupResult struct {
	// Object is the object with its undo applied as far as the apiserver lets an update change
	// it back (Restorable) and every annotation starting with ReservedPrefix removed; nil
	// when the object carries no such annotation (nothing to do).
	Object []byte
	// Unrestored lists the JSON Pointers of the undo's entries left as the hooks wrote them:
	// fields an update cannot change back (a Pod's tolerations, its nodeSelector, …).
	Unrestored []string
	// Dropped says why the undo was not applied at all ("" when it was, or there was none): a
	// Reason (unauthentic, no_key, malformed, identity, too_large, clear_text).
	Dropped string
}

// Cleanup returns what `synchook cleanup` writes back to the stored JSON object raw of kind gvk
// on side, with the syncer stopped and the hooks that wrote its undo gone (PlanCleanup): the
// undo's entries that an update may change back, each only where the object still holds what
// the hooks wrote, and no synchook.io/* annotation. Only a value that opens under r for this
// object is applied; anything else is tenant data: Dropped says why, and none of it is
// applied. It never changes identity. Errors: raw is not a JSON object; ctx ended.
func (r Rule) Cleanup(ctx context.Context, gvk schema.GroupVersionKind, side Side, raw []byte) (CleanupResult, error) {
	if !jsonscan.Valid(raw) {
		var v any
		return CleanupResult{}, fmt.Errorf("decode %s: %w", gvk.Kind, json.Unmarshal(raw, &v))
	}
	doc := jsondoc.New(raw)
	ann, _ := doc.Lookup([]string{"metadata", "annotations"})
	annotations, _ := ann.(map[string]any)
	reserved := false
	for k := range annotations {
		reserved = reserved || strings.HasPrefix(k, ReservedPrefix)
	}
	if !reserved {
		return CleanupResult{}, nil
	}
	var res CleanupResult
	if value, ok := annotations[Annotation].(string); ok {
		// the plan reads doc before anything is applied
		steps, unrestored, dropped := r.PlanCleanup(SubjectOf(gvk, side, raw, doc), value)
		res.Unrestored, res.Dropped = unrestored, dropped
		switch res := Restore(ctx, doc, steps); res.Reason {
		case "":
		case ReasonDeadline:
			return CleanupResult{}, ctx.Err()
		default:
			return CleanupResult{}, fmt.Errorf("the undo cannot be applied: %s", res.Reason)
		}
	}
	ann, _ = doc.Lookup([]string{"metadata", "annotations"}) // the undo may have put back another map
	if annotations, ok := ann.(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(annotations)) {
			if strings.HasPrefix(k, ReservedPrefix) {
				doc.Remove([]string{"metadata", "annotations", k})
			}
		}
	}
	var err error
	if res.Object, err = doc.Bytes(); err != nil {
		return CleanupResult{}, err
	}
	return res, nil
}
