package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/decode"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// runTyped is runOps on the typed (or Unstructured) object: one decode of raw, the hooks, one
// compare (patch.DiffTyped of a deep copy and the hooked object; an Unstructured object's
// encodings diffed); when records is set the undo is sealed into the patch (outcome.sealed).
func runTyped(ctx context.Context, rn *call, c *chain, raw []byte, records bool) (outcome, error) {
	gvk := c.key.GVK
	obj := c.newObject()
	if err := decode.Object(raw, obj); err != nil {
		return outcome{}, &failure.DecodeError{GVK: gvk, Err: err}
	}
	if err := stepBoundary(ctx, c); err != nil {
		return outcome{}, err
	}
	if _, ok := obj.(runtime.Unstructured); ok {
		return runUnstructured(ctx, rn, c, raw, obj)
	}
	st := rn.statsOf(c)
	light := !st.changedMore.Load()
	var before client.Object // the typed round trip of raw; light: its labels and annotations alone
	if light {
		before = c.newObject()
		before.SetLabels(maps.Clone(obj.GetLabels()))
		before.SetAnnotations(maps.Clone(obj.GetAnnotations()))
	} else {
		before, _ = obj.DeepCopyObject().(client.Object)
	}
	if _, write := c.key.Type.ReadOf(); write {
		if ann := obj.GetAnnotations(); undo.DropReserved(ann) { // after the copy: the removal is a change
			obj.SetAnnotations(ann)
		}
	}
	out, err := c.exec(ctx, rn, obj) // a hook's error on a Secret is withheld already (failure.FromHook)
	if err != nil {
		return outcome{}, err
	}
	if light {
		o, ok, err := runLight(ctx, rn, c, raw, before, out, records)
		if err != nil || ok {
			return o, err
		}
		// the hooks changed more than the two maps: compare with the whole object before them
		st.changedMore.Store(true)
		st.mapsOnly.Store(0)
		if before = c.newObject(); decode.Object(raw, before) != nil {
			return outcome{}, fmt.Errorf("decode %s again", c.key.GVK.Kind)
		}
	}
	ops, err := patch.DiffTyped(before, out)
	if err != nil {
		return outcome{}, fmt.Errorf("%s: compare the hooked object: %w", c.key, err)
	}
	if !light {
		st.observe(onlyMetadataMaps(ops))
	}
	if len(ops) == 0 {
		return outcome{hooks: len(c.hooks)}, nil
	}
	if err := patch.Guard(c.names(), ops); err != nil {
		return outcome{}, &failure.HookError{Hook: c.names(), Type: c.key.Type, GVK: gvk, Err: err}
	}
	if err := stepBoundary(ctx, c); err != nil {
		return outcome{}, err
	}
	if ops, err = patch.RebaseVia(raw, rn.recordOf(raw).Indexed().LookupUnique, ops); err != nil {
		return outcome{}, fmt.Errorf("%s: %w", c.key, err)
	}
	o := outcome{ops: ops, hooks: len(c.hooks)}
	if records {
		if o.ops, _, o.sealed, err = rn.record(c, raw, o.ops, false); err != nil {
			return outcome{}, err
		}
	}
	return o, nil // the answer is spliced from the request and the patch when asked (Result.Answer)
}

// runLight is runTyped's compare for a chain whose hooks change only labels and annotations
// (chainStats): before holds the two maps as decoded, out is the hooked object. It encodes out
// once and diffs that with raw itself (metadataOps: raw is the request's JSON, so no rebase);
// when more than the two maps differ it reports false and the caller compares the whole object.
func runLight(ctx context.Context, rn *call, c *chain, raw []byte, before, out client.Object, records bool) (outcome, bool, error) {
	after, err := json.Marshal(out)
	if err != nil {
		return outcome{}, false, fmt.Errorf("encode %s after hooks: %w", c.key.GVK.Kind, err)
	}
	if err := stepBoundary(ctx, c); err != nil {
		return outcome{}, false, err
	}
	ops, ok := metadataOps(raw, after, before, out)
	if !ok {
		return outcome{}, false, nil
	}
	o := outcome{ops: ops, hooks: len(c.hooks)}
	if len(ops) == 0 {
		return outcome{hooks: len(c.hooks)}, true, nil
	}
	if records {
		var sealed bool
		o.ops, _, sealed, err = rn.record(c, raw, o.ops, false) // identity as the request has it (only the maps changed)
		if err != nil || !sealed {
			return outcome{}, sealed, err // not sealed: the whole compare records it
		}
		o.sealed = true
	}
	return o, true, nil
}

// runUnstructured is runTyped for an object of a kind the scheme does not know, decoded into
// obj: its encodings before and after the hooks are diffed.
func runUnstructured(ctx context.Context, rn *call, c *chain, raw []byte, obj client.Object) (outcome, error) {
	gvk := c.key.GVK
	before, err := json.Marshal(obj)
	if err != nil {
		return outcome{}, fmt.Errorf("encode %s: %w", gvk.Kind, err)
	}
	if _, write := c.key.Type.ReadOf(); write {
		if ann := obj.GetAnnotations(); undo.DropReserved(ann) { // after the encoding: the removal is a change
			obj.SetAnnotations(ann)
		}
	}
	out, err := c.exec(ctx, rn, obj)
	if err != nil {
		return outcome{}, err
	}
	after, err := json.Marshal(out)
	if err != nil {
		return outcome{}, fmt.Errorf("encode %s after hooks: %w", gvk.Kind, err)
	}
	if err := stepBoundary(ctx, c); err != nil {
		return outcome{}, err
	}
	var ops []patch.Operation
	if !bytes.Equal(before, after) {
		ops = patch.DiffMarshaled(before, after)
	}
	if len(ops) == 0 {
		return outcome{hooks: len(c.hooks)}, nil
	}
	if err := patch.GuardDocuments(c.names(), ops, before, after); err != nil {
		return outcome{}, &failure.HookError{Hook: c.names(), Type: c.key.Type, GVK: gvk, Err: err}
	}
	if err := stepBoundary(ctx, c); err != nil {
		return outcome{}, err
	}
	if ops, err = patch.Rebase(raw, ops); err != nil {
		return outcome{}, fmt.Errorf("%s: %w", c.key, err)
	}
	return outcome{ops: ops, hooks: len(c.hooks)}, nil
}
