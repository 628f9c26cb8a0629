package engine

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// ReservedPrefix starts the annotations that are synchook's own (UndoAnnotation,
// ProvenanceAnnotation); `synchook cleanup` removes every annotation with it.
const ReservedPrefix = "synchook.io/"

// CleanupResult is what Cleanup makes of one stored object.
type CleanupResult struct {
	// Object is the object with its undo applied as far as the apiserver lets an update change
	// it back (undo.Restorable) and every annotation starting with ReservedPrefix removed; nil
	// when the object carries no such annotation (nothing to do).
	Object []byte
	// Unrestored lists the JSON Pointers of the undo's entries left as the hooks wrote them:
	// fields an update cannot change back (a Pod's tolerations, its nodeSelector, …).
	Unrestored []string
	// Dropped says why the undo was not applied at all ("" when it was, or there was none): a
	// reason of UndoObserver (unauthentic, no_key, malformed, identity, too_large).
	Dropped string
}

// Cleanup returns what `synchook cleanup` writes back to the stored object raw of kind gvk on
// side, with the syncer stopped and the hooks that wrote its undo gone: the undo's entries
// that an update may change back (undo.Restorable), each only where the object still holds
// what the hooks wrote, and no synchook.io/* annotation. Only a sealed undo that opens with
// the Registry's keys for this object is applied; anything else (clear text, a value that does
// not open) is tenant data: Dropped says why, and none of it is applied. It never changes
// identity. Errors: a *DecodeError when raw is not a JSON object.
func (r *Registry) Cleanup(ctx context.Context, gvk schema.GroupVersionKind, side undo.Side, raw []byte) (CleanupResult, error) {
	if !jsonscan.Valid(raw) {
		var v any
		return CleanupResult{}, &DecodeError{GVK: gvk, Err: json.Unmarshal(raw, &v)}
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
	if value, ok := annotations[UndoAnnotation].(string); ok {
		key := Key{GVK: gvk, Type: hooks.HookTypeOf(hooks.Side(side), hooks.OpGet)}
		s := subject(key, raw)
		s.Doc = func() (undo.Doc, error) { return doc, nil } // read before anything is applied
		steps, unrestored, dropped := r.rule(key).PlanCleanup(s, value)
		res.Unrestored, res.Dropped = unrestored, dropped
		if res := undo.Apply(ctx, doc, steps); res.Reason == UndoDeadline {
			return CleanupResult{}, ctx.Err()
		}
		if patch.Guard("", doc.Ops()) != nil {
			return CleanupResult{}, errors.New("the undo would change identity") // undo's plans refuse it
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
