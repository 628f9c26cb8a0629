package engine

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/undo"
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
	tree, err := decodeTree(raw)
	if err != nil {
		return CleanupResult{}, &DecodeError{GVK: gvk, Err: err}
	}
	ann, _ := lookupTree(tree, []string{"metadata", "annotations"})
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
		steps, dropped := r.cleanupSteps(gvk, side, raw, value)
		res.Dropped = dropped
		immutable := isImmutable(raw)
		kept := steps[:0]
		for _, s := range steps {
			if undo.Restorable(gvk, s.tokens) && (!immutable || s.tokens[0] == "metadata") {
				kept = append(kept, s)
			} else if !holds(tree, s.tokens, s.entry.Original) {
				// Left as it is, and not what the syncer sent (it may have changed since the
				// hooks wrote it: the apiserver's default tolerations on a list a hook created).
				res.Unrestored = append(res.Unrestored, s.entry.Path)
			}
		}
		id := identityOfTree(tree)
		if reason := applyUndoSteps(ctx, tree, kept); reason == UndoDeadline {
			return CleanupResult{}, ctx.Err()
		}
		if identityOfTree(tree) != id {
			return CleanupResult{}, errors.New("the undo would change identity") // parseSteps refuses it
		}
	}
	ann, _ = lookupTree(tree, []string{"metadata", "annotations"})
	if annotations, ok := ann.(map[string]any); ok {
		for k := range annotations {
			if strings.HasPrefix(k, ReservedPrefix) {
				delete(annotations, k)
			}
		}
	}
	if res.Object, err = json.Marshal(tree); err != nil {
		return CleanupResult{}, err
	}
	return res, nil
}

// cleanupSteps returns the steps of the undo value on raw, or why it is dropped.
func (r *Registry) cleanupSteps(gvk schema.GroupVersionKind, side undo.Side, raw []byte, value string) ([]undoStep, string) {
	if len(value) > r.opts.MaxUndoBytes {
		return nil, UndoTooLarge
	}
	if undo.IsSealed(value) {
		rec, reason := r.openSealed(gvk, side, raw, value)
		if reason != "" {
			return nil, reason
		}
		return parseSteps(rec.Entries)
	}
	return nil, UndoClearText // tenant data: never applied
}

// holds reports whether tree holds value at tokens (value nil: nothing there).
func holds(tree any, tokens []string, value json.RawMessage) bool {
	cur, has := lookupTree(tree, tokens)
	if has != (value != nil) {
		return false
	}
	if !has {
		return true
	}
	var v any
	return decodeValue(value, &v) == nil && reflect.DeepEqual(cur, v)
}
