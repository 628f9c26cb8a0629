package undo

// The two flows through an object the engine asks for: a write that brings an undo synchook
// wrote itself (Rule.Rewrite) and a read of what the host stored (Plan.Read). The engine
// hands in its chain as a function of the object (run, chain); the plan, the applier and
// the seal are this package's.

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/patch"
)

// Rewrite is the write of the object raw (read as doc; s its Subject on the read side of the
// write) that brings in value an undo synchook wrote itself (BeforeWrite under r, the read
// rule of the write's side). The undo's steps are applied onto doc first and the annotation
// removed; run makes the write chain's patch of that restored object, recording the carried
// entries before its own, and the patch goes on doc after the restore. Carried entries that
// the chain did not record (it changed nothing) are sealed alone by sealCarry (nil: the chain
// records no undo) onto doc. ops is the patch from raw to the result: nil when nothing changed
// (the restore and the hooks often cancel out — the hooks put back what the undo took off,
// sealed alike), so the new undo records only the new change and never nests the old one;
// the answer is then made from doc. own is false, doc untouched, when value is not
// synchook's for s (on a Create, always): whatever is there is the tenant's. Errors: run's
// and sealCarry's as they are; BeforeWrite's; a patch that does not apply.
func (r Rule) Rewrite(ctx context.Context, update bool, s Subject, raw []byte, doc *jsondoc.Doc, value string,
	run func(restored []byte, carry []Entry) ([]patch.Operation, error), sealCarry func(carry []Entry) (string, error),
) (ops []patch.Operation, own bool, err error) {
	carry, own, err := r.BeforeWrite(ctx, update, s, doc, value)
	if !own || err != nil {
		return nil, own, err
	}
	restored, err := doc.Bytes()
	if err != nil {
		return nil, true, err
	}
	ops, err = run(restored, carry)
	if err != nil {
		return nil, true, err
	}
	if err := doc.ApplyOps(ops); err != nil { // a patch of restored: it goes on after the restore
		return nil, true, err
	}
	if len(carry) > 0 && sealCarry != nil {
		if _, has := doc.Lookup(annotationTokens); !has { // the chain changed nothing: the carried entries alone
			value, err := sealCarry(carry)
			if err != nil {
				return nil, true, err
			}
			SetAnnotation(doc, value) // false: no metadata object to carry them on
		}
	}
	if !doc.Changed() {
		return nil, true, nil
	}
	final, err := doc.Bytes()
	if err != nil {
		return nil, true, err
	}
	ops, err = patch.Diff(raw, final)
	return ops, true, err
}

// Read is the read view of a stored object (doc, its bytes raw): p applied onto doc (View,
// the carried entries resealed by reseal) — or none of it when the undo is dropped
// (Result.Reason), doc then being raw again — and then the patch that chain (the read
// chain's own; nil: none) make of that view, applied on doc after the undo's edits. It
// returns the Doc to answer from (its Ops are the patch from raw) and the undo's Result.
// Errors: chain's as they are; a patch that does not apply.
func (p Plan) Read(ctx context.Context, doc *jsondoc.Doc, raw []byte, reseal func(carry []Entry) (string, error),
	chain func(view []byte) ([]patch.Operation, error),
) (*jsondoc.Doc, Result, error) {
	res := Result{Reason: p.Reason}
	if res.Reason == "" {
		res = p.View(ctx, doc, reseal)
	}
	if res.Reason != "" {
		doc = jsondoc.New(raw) // whatever was half-applied is dropped
	}
	if chain == nil {
		return doc, res, nil
	}
	view, err := doc.Bytes()
	if err != nil {
		return doc, res, err
	}
	ops, err := chain(view)
	if err != nil {
		return doc, res, err
	}
	return doc, res, doc.ApplyOps(ops) // a patch of view: it goes on after the undo's edits
}

// RejectedObserver is told when a read drops an Annotation, with the Reason* why (an engine
// Runner's Observer that also implements it: metrics.Recorder counts them).
type RejectedObserver interface {
	ObserveUndoRejected(t hooks.HookType, gvk schema.GroupVersionKind, reason string)
}

// SkippedObserver is told, after a read applied an undo, how many of its entries were left
// out and why (SkipChanged, SkipHeld, SkipNoPlace): the object as the host stores it no longer
// held what the hooks wrote there (an engine Runner's Observer that also implements it:
// metrics.Recorder counts them).
type SkippedObserver interface {
	ObserveUndoSkipped(t hooks.HookType, gvk schema.GroupVersionKind, reason string, n int)
}

// Tell tells o what a read of kind gvk by hook type t made of an Annotation: why it was
// dropped (res.Reason) to a RejectedObserver, else the entries the applied undo left out
// (res.Skipped, by reason) to a SkippedObserver. o may implement either, both or neither.
func (res Result) Tell(o any, t hooks.HookType, gvk schema.GroupVersionKind) {
	if ro, ok := o.(RejectedObserver); ok && res.Reason != "" {
		ro.ObserveUndoRejected(t, gvk, res.Reason)
	}
	if so, ok := o.(SkippedObserver); ok && res.Reason == "" {
		for reason, n := range res.Skipped {
			so.ObserveUndoSkipped(t, gvk, reason, n)
		}
	}
}
