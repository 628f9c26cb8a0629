package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// runRestored is runChain for a write that brings an undo synchook wrote itself
// (undo.Rule.Rewrite under the read rule of c's side): the chain runs on the object with
// that undo applied, recording only the new change. own is false when raw brings no such undo
// (on a Create, always): whatever is there is the tenant's, and runChain goes on.
func (rn *call) runRestored(ctx context.Context, c *chain, raw []byte) (o outcome, own bool, err error) {
	value, had := rn.undoAnnotationOf(raw) // the plan (intake.Record.MayCarryUndo) looked for the marker
	if !had {
		return outcome{}, false, nil
	}
	rec := rn.recordOf(raw)
	if err := rec.CheckJSON(c.key.GVK, rn.validJSON); err != nil { // the Doc splits only what it reads
		return outcome{}, true, err
	}
	doc := rec.Doc()
	read, _ := c.key.Type.ReadOf() // runChain calls runRestored for a Create or an Update only
	readKey := Key{GVK: c.key.GVK, Type: read}
	var theirs error // the chain's and the seal's errors, which go out as they are
	run := func(restored []byte, carry []undo.Entry) ([]patch.Operation, error) {
		in := *rn // the chain records the carried entries before its own
		in.carry = carry
		in.own, in.rec = intake.Record{Raw: restored}, &in.own // the restored object's one record (derived)
		o, theirs = in.runChain(ctx, c, restored)
		return o.ops, theirs
	}
	var sealCarry func([]undo.Entry) (string, error)
	if rn.reg.recordsUndo(c) {
		sealCarry = func(carry []undo.Entry) (value string, err error) {
			value, theirs = rn.reg.seal(c, rn.identityOf(c.key, raw), nil, carry)
			return value, theirs
		}
	}
	ops, own, err := rn.reg.rule(readKey).Rewrite(ctx, c.key.Type.Op() == hooks.OpUpdate, rn.subjectOf(readKey, raw, doc), raw, doc, value, run, sealCarry)
	switch {
	case err != nil && !errors.Is(err, theirs):
		return outcome{}, own, fmt.Errorf("%s: %w", c.key, err)
	case err != nil || len(ops) == 0:
		return outcome{hooks: o.hooks}, own, err
	}
	return outcome{ops: ops, hooks: o.hooks, doc: doc}, true, nil
}

// applyOps applies the JSON Patch ops to doc.
func applyOps(doc []byte, ops ...patch.Operation) ([]byte, error) {
	p, err := patch.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return patch.Apply(doc, p)
}

// runUndoRead is runOps for a read chain that first applies the undo its kind's write chains
// recorded (RegistryOptions.Undo), then runs its own hooks on the restored view, under one slot.
// An undo that is not synchook's (undo.Rule) is dropped and counted, never an error. An undo of
// the maps alone works on them (undoMetadata), any other on raw as a jsondoc.Doc (undo.Plan.Read).
func (rn *call) runUndoRead(ctx context.Context, c *chain, raw []byte) (outcome, error) {
	value, had := rn.undoAnnotationOf(raw)
	if !had {
		if len(c.hooks) == 0 {
			return outcome{}, rn.recordOf(raw).CheckJSON(c.key.GVK, rn.validJSON)
		}
		return rn.runChain(ctx, c, raw)
	}
	inner, done, ok := rn.hold()
	if !ok {
		return outcome{}, fmt.Errorf("%s: %w", c.key, failure.ErrOverloaded)
	}
	defer done()
	rec := rn.recordOf(raw)
	if err := rec.CheckJSON(c.key.GVK, rn.validJSON); err != nil { // the Doc splits only what it reads
		return outcome{}, err
	}
	doc := rec.Doc()
	plan := rn.reg.rule(c.key).PlanRead(rn.subjectOf(c.key, raw, doc), value)
	if plan.Reason == "" {
		if o, res, done, err := inner.undoMetadata(ctx, c, rec, plan); done {
			res.Tell(rn.observer, c.key.Type, c.key.GVK)
			return o, err
		}
	}
	var hooksOf func([]byte) ([]patch.Operation, error)
	var theirs error // the hooks' errors, which go out as they are
	n := 0
	if len(c.hooks) > 0 {
		hooksOf = func(view []byte) ([]patch.Operation, error) {
			o, err := inner.runChain(ctx, c, view) // the same hooks without the undo step
			n, theirs = o.hooks, err
			return o.ops, err
		}
	}
	doc, res, err := plan.Read(ctx, doc, raw, inner.resealer(c, raw), hooksOf)
	res.Tell(rn.observer, c.key.Type, c.key.GVK)
	switch {
	case err != nil && !errors.Is(err, theirs):
		return outcome{}, fmt.Errorf("%s: %w", c.key, err)
	case err != nil:
		return outcome{}, err
	case !doc.Changed():
		return outcome{hooks: n}, nil // the undo dropped and no change by the hooks
	}
	if err := stepBoundary(ctx, c); err != nil {
		return outcome{}, err
	}
	return outcome{ops: doc.Ops(), hooks: n, doc: doc}, nil
}
