package engine

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/patch"
)

// Mutate runs the chain of (gvk, t) on the JSON object raw and returns the JSON Patch from raw to
// the hooked object.
//
// raw is read once at intake into its record (package intake), which every later stage reads; the
// plan (plan.go) is chosen from the chain's capabilities and the record before any hook runs: a
// chain of label/annotation hooks works on the two maps alone, a chain of strip hooks on raw;
// any other decodes raw once (the scheme's type, or Unstructured), runs every hook in
// registration order and compares once (patch.DiffTyped: fields the compiled types do not know
// are never touched), the operations moved onto raw. No hooks, or no change: a nil Patch.
//
// Errors: *DecodeError for malformed input; *HookError (naming hook, type and kind) when a hook
// fails, panics, changes apiVersion, kind, name, namespace or uid, returns another kind, or is
// still running when ctx ends — the hook is then abandoned and never waited for.
//
// Mutate runs without limits, per-hook deadlines or an observer: it is for tools and tests.
// Servers run requests through a Runner (NewRunner), which has them.
func (r *Registry) Mutate(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (Result, error) {
	return NewRunner(r, RunnerOptions{}).Mutate(ctx, gvk, t, raw)
}

// MutateWithOptions is Mutate with the optional parts of the request in opts: an old object for
// an Update* hook type (see MutateOptions and Runner.MutateWithOptions), e.g. for `synchook
// test` to run a case as an admission UPDATE. Like Mutate it runs without limits, per-hook
// deadlines or an observer.
func (r *Registry) MutateWithOptions(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte, opts MutateOptions) (Result, error) {
	return NewRunner(r, RunnerOptions{}).MutateWithOptions(ctx, gvk, t, raw, opts)
}

// run is Mutate with the Runner rn's limits, deadlines and observer.
func (rn *call) run(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (Result, error) {
	rec, err := rn.reg.checkInput(gvk, t, raw, rn.validJSON, &rn.own) // before any chain reads it: package intake
	if err != nil {
		return Result{}, err
	}
	rn.rec = rec
	if rn.old != nil {
		if ctx, err = rn.reg.withOldObject(ctx, gvk, t, rn.old, rn.validJSON); err != nil {
			return Result{}, err
		}
	}
	if rn.reg.listChain(gvk, t) != nil { // a list of a hooked kind is a batch: list.go
		return rn.runList(ctx, gvk, t, raw)
	}
	o, err := rn.runOps(ctx, gvk, t, raw)
	if err != nil {
		return Result{}, err
	}
	res := Result{raw: raw, ops: o.ops, Hooks: o.hooks, Operations: len(o.ops), doc: o.doc, rec: rec}
	if c := rn.reg.chains[Key{GVK: gvk, Type: t}]; c != nil {
		res.goType = c.objectType
	}
	if res.Patch, err = patch.Marshal(o.ops); err != nil {
		return Result{}, err
	}
	return res, nil
}

// outcome is what one chain run gives: the operations of the patch from the request object to
// the hooked one (nil: no change) and the number of hooks that ran.
type outcome struct {
	ops   []patch.Operation
	hooks int
	// sealed says ops end with the operation that records the undo.
	sealed bool
	// doc is the request's object with ops made on it, when the chain edited one (an undo
	// read): the answer is encoded from it.
	doc *jsondoc.Doc
}

// runOps is Mutate for one object: it returns the operations of the patch from raw to the hooked
// object (nil when nothing changed) and the number of hooks that ran.
func (rn *call) runOps(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (outcome, error) {
	c := rn.reg.chains[Key{GVK: gvk, Type: t}]
	if c == nil {
		return outcome{}, nil
	}
	return rn.runChainOps(ctx, c, raw)
}

// runChainOps is runOps for the chain c.
func (rn *call) runChainOps(ctx context.Context, c *chain, raw []byte) (outcome, error) {
	if c.undoRead {
		return rn.runUndoRead(ctx, c, raw)
	}
	return rn.runChain(ctx, c, raw)
}

// applyChain runs the chain c on doc and returns the hooked object and the number of hooks run.
func (rn *call) applyChain(ctx context.Context, c *chain, doc []byte) ([]byte, int, error) {
	o, err := rn.runChainOps(ctx, c, doc)
	if err != nil || len(o.ops) == 0 {
		return doc, o.hooks, err
	}
	out, err := applyOps(doc, o.ops...)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", c.key, err)
	}
	return out, o.hooks, nil
}

// recordOf returns the intake record of raw: the call's own when raw is its object, else a derived one.
func (r *call) recordOf(raw []byte) *intake.Record {
	if own := r.rec; own != nil && len(raw) > 0 && len(own.Raw) == len(raw) && &own.Raw[0] == &raw[0] {
		return own
	}
	return &intake.Record{Raw: raw}
}

// checkInput checks raw, the object of a request for (gvk, t), before any chain reads it and
// returns its own record, made in into (intake.Shape.Check): a *failure.DecodeError with an
// *intake.InputError for an object InputError describes. Nil record: a (gvk, t) without a chain (not checked), or invalid JSON
// (left to the chain's decode, which names the syntax error). A list of a hooked kind is checked
// as a list here and each item in runList (checkItem).
func (r *Registry) checkInput(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte, valid bool, into *intake.Record) (*intake.Record, error) {
	list := false
	if r.chains[Key{GVK: gvk, Type: t}] == nil {
		if r.listChain(gvk, t) == nil {
			return nil, nil
		}
		list = true
	}
	err := intake.ShapeOf(r.scheme, gvk, list).Check(raw, gvk, "object", "the request is for", into)
	if err != nil && (&intake.Record{Raw: raw}).CheckJSON(gvk, valid) != nil {
		return nil, nil // the scan's answer on invalid JSON means nothing
	}
	if err != nil {
		return nil, &failure.DecodeError{GVK: gvk, Err: err}
	}
	if into.Raw == nil {
		return nil, nil
	}
	return into, nil
}

// withOldObject checks old (MutateOptions.OldObject) as checkInput checks the object and
// returns ctx carrying it for the hooks (hooks.WithOldObject); nothing for a (gvk, t) without a
// chain, an error for a list. Errors are *DecodeErrors with Old set.
func (r *Registry) withOldObject(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, old []byte, valid bool) (context.Context, error) {
	if r.chains[Key{GVK: gvk, Type: t}] == nil {
		if r.listChain(gvk, t) != nil {
			return nil, &failure.DecodeError{GVK: gvk, Old: true, Err: &intake.InputError{Reason: "an old object is for one object, not a list"}}
		}
		return ctx, nil
	}
	if err := (&intake.Record{Raw: old}).CheckJSON(gvk, valid); err != nil {
		err.(*failure.DecodeError).Old = true //nolint:errorlint // CheckJSON's own
		return nil, err
	}
	var rec intake.Record
	err := intake.ShapeOf(r.scheme, gvk, false).Check(old, gvk, "old object", "the request is for", &rec)
	if err == nil && rec.Raw == nil {
		err = errors.New("not a JSON object")
	}
	if err != nil {
		return nil, &failure.DecodeError{GVK: gvk, Old: true, Err: err}
	}
	return hooks.WithOldObject(ctx, old), nil
}

// checkItem is checkInput for item, an item (valid JSON) of a list whose items are of kind gvk.
func (r *Registry) checkItem(gvk schema.GroupVersionKind, item []byte) error {
	var rec intake.Record
	if err := intake.ShapeOf(r.scheme, gvk, false).Check(item, gvk, "item", "the list is of", &rec); err != nil {
		return &failure.DecodeError{GVK: gvk, Err: err}
	}
	return nil
}
