package engine

// Automatic undo: what the engine asks package undo, which holds the rule, the records, the
// seal, the identity a seal binds to, the applier and cleanup (its doc says why a tenant
// cannot steer any of it). The engine asks three things:
//
//   - before a write (runChain → ownUndo, runRestored): undo.Rule.PlanWrite and undo.Apply —
//     an Update that brings an undo synchook wrote itself applies it first and records only
//     the new change (never nested; a Create never does: what it brings is the tenant's);
//   - after the compare (withUndo, sealWith, recordMetadataUndo): the entries of the change
//     (undo.RecordOps, undo.RecordMaps: the entries and the empty-map rule) sealed
//     by undo.Rule.Seal with the newest key and written by one of undo's annotation writers.
//     Without a key the write fails with undo.ErrNeedsKey and writes nothing;
//   - on a read (runUndoRead → undoView, undoMetadata): undo.Rule.PlanRead and undo.Apply
//     onto the object as the host stored it. What does not open is counted (UndoObserver),
//     never applied, and the read never fails because of it.
//
// On the write side the reserved annotations (undo.Annotation, ProvenanceAnnotation) are
// synchook's alone: a write chain takes them off the object before its hooks run, and the
// removal is part of the recorded undo, so the reader gets the tenant's value back.

import (
	"context"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// UndoObserver is told when a read chain drops an undo.Annotation, with the undo.Reason* why
// (a Runner's Observer that also implements it: metrics.Recorder counts them).
type UndoObserver interface {
	ObserveUndoRejected(t hooks.HookType, gvk schema.GroupVersionKind, reason string)
}

// UndoSkipObserver is told, after a read applied an undo, how many of its entries were left
// out and why (undo.SkipChanged, undo.SkipHeld, undo.SkipNoPlace): the object as the host
// stores it no longer held what the hooks wrote there (a Runner's Observer that also
// implements it: metrics.Recorder counts them).
type UndoSkipObserver interface {
	ObserveUndoSkipped(t hooks.HookType, gvk schema.GroupVersionKind, reason string, n int)
}

// ProvenanceAnnotation and undo.Annotation are reserved: a write chain removes what the object
// brings of them before its hooks run.
var reservedAnnotations = [...]string{undo.Annotation, ProvenanceAnnotation}

// dropReserved deletes the reserved annotations from ann and reports whether there were any.
func dropReserved(ann map[string]string) bool {
	found := false
	for _, k := range reservedAnnotations {
		if _, ok := ann[k]; ok {
			delete(ann, k)
			found = true
		}
	}
	return found
}

func isUndoPath(p string) bool {
	return p == "/metadata/annotations/synchook.io~1undo"
}

// isReservedPath reports whether p is the JSON Pointer of a reserved annotation.
func isReservedPath(p string) bool {
	return isUndoPath(p) || p == "/metadata/annotations/synchook.io~1mutated-by"
}

// rule returns the one rule's inputs for the chains of key's kind and side (undo.Rule): the
// keys, the size bound, and whether the kind's Update chain of that side rewrites a change.
func (r *Registry) rule(key Key) undo.Rule {
	return undo.Rule{Ring: r.opts.Keys.Ring(), MaxBytes: r.opts.MaxUndoBytes, Rewrites: func(writers []string) bool { return r.rewrites(key, writers) }}
}

// rewrites reports whether the Update chain of the side of key records undo and has every
// hook of writers (same name, same revision): its next write puts back whatever the undo takes
// off.
func (r *Registry) rewrites(key Key, writers []string) bool {
	wc := r.chains[Key{GVK: key.GVK, Type: key.Type.UpdateOf()}]
	if wc == nil || !r.recordsUndo(wc) || len(writers) == 0 {
		return false
	}
	for _, w := range writers {
		if !slices.Contains(wc.writers, w) {
			return false
		}
	}
	return true
}

// seal returns the annotation value for entries recorded by the write chain c on the object
// id, after the carried entries carry (undo.Rule.Seal), and notes the sealed kind. Errors: a
// *HookError of c wrapping undo.ErrNeedsKey or undo.ErrTooLarge.
func (r *Registry) seal(c *chain, id undo.Identity, entries, carry []undo.Entry) (string, error) {
	side := c.key.Type.Side()
	rule := undo.Rule{Ring: r.opts.Keys.Ring(), MaxBytes: r.opts.MaxUndoBytes}
	value, err := rule.Seal(id, side, c.writers, entries, carry)
	if err != nil {
		return "", &HookError{Hook: c.names(), Type: c.key.Type, GVK: c.key.GVK, Err: err}
	}
	r.opts.Keys.NoteSealed(c.key.GVK, side)
	return value, nil
}

// subjectOf is undo.SubjectIn for the object raw of the call, read from what checkInput found
// when raw is the request's object (no scan of the whole object), with doc as its Doc.
func (r *call) subjectOf(key Key, raw []byte, doc *jsondoc.Doc) undo.Subject {
	immutable, _ := r.indexOf(raw).Lookup("/immutable")
	return undo.SubjectIn(r.identityOf(key, raw), key.GVK, key.Type.Side(), string(immutable), doc)
}

// undoAnnotationOf is undo.AnnotationIn for the object raw of the call, read in its metadata
// (metadataOf).
func (r *call) undoAnnotationOf(raw []byte) (string, bool) {
	meta, ok := r.metadataOf(raw)
	if !ok {
		return "", false
	}
	return undo.AnnotationIn(meta)
}

// sealOnto records the undo of ops — the patch of raw that the write chain c's hooks made, out
// being the hooked typed object — on out itself, sealed (after the carried entries of the
// call), and appends to ops the operation that writes it: so out's one encoding is the hooked
// object with its undo. It reports false, changing nothing, where the entries need the hooked
// document (sealWith): runChain then records it on the patch (withUndo).
func (r *call) sealOnto(c *chain, raw []byte, out client.Object, ops *[]patch.Operation) (bool, error) {
	value, ok, err := r.sealWith(c, raw, ops)
	if err != nil || !ok || value == "" {
		return ok, err
	}
	out.SetAnnotations(undo.SetIn(maps.Clone(out.GetAnnotations()), value)) // never the hook's own map
	return true, nil
}

// sealWith records the undo of ops for the object raw (undo.RecordOps on raw alone),
// sealed after the call's carried entries, appending the operation that writes it to ops, and
// returns the value ("" when ops need no undo); false, changing nothing, where the entries
// need the hooked document (withUndo records them).
func (r *call) sealWith(c *chain, raw []byte, ops *[]patch.Operation) (string, bool, error) {
	meta, hasMeta := r.metadataOf(raw)
	out, value, ok, err := undo.RecordOps(raw, r.indexOf(raw), meta, hasMeta, *ops, false, r.sealer(c, raw, r.carry))
	if err != nil || !ok {
		return "", false, err
	}
	*ops = out
	return value, true, nil
}

// sealer returns Registry.seal for the write chain c on the object raw (identity as raw has
// it: the guard keeps it), after the carried entries carry.
func (r *call) sealer(c *chain, raw []byte, carry []undo.Entry) func([]undo.Entry) (string, error) {
	return func(entries []undo.Entry) (string, error) {
		return r.reg.seal(c, r.identityOf(c.key, raw), entries, carry)
	}
}

// identityOf is undo.IdentityIn for the object raw of the call, of key's kind and side, read in
// its metadata (metadataOf).
func (r *call) identityOf(key Key, raw []byte) undo.Identity {
	meta, _ := r.metadataOf(raw)
	return undo.IdentityIn(key.GVK, key.Type.Side(), meta)
}

// undoView is the read plan p applied onto doc, the stored object raw that the read chain c
// hands on (undo.Plan.View), its carried entries sealed as the kind's Update chain seals them.
// It returns why the undo is dropped ("" when it was applied); doc is then half-edited and
// must be dropped.
func (rn *call) undoView(ctx context.Context, c *chain, raw []byte, doc *jsondoc.Doc, p undo.Plan) string {
	res := p.View(ctx, doc, func(carry []undo.Entry) (string, error) {
		wc := rn.reg.chains[Key{GVK: c.key.GVK, Type: c.key.Type.UpdateOf()}]
		if wc == nil {
			wc = &chain{key: c.key}
		}
		return rn.reg.seal(wc, rn.identityOf(wc.key, raw), nil, carry)
	})
	if res.Reason == "" {
		rn.observeUndoSkipped(c.key, res.Skipped)
	}
	return res.Reason
}

// undoMetadata is undoView and the answer for an undo whose plan is on the labels and
// annotations alone (undo.Plan.OnMetadataMaps) and whose read chain's own hooks, if any, are
// MetadataHooks: undo.Plan.ViewMaps, no decode of the object, no JSON Patch
// apply. dropped says why the undo was dropped ("" when it was applied). It returns
// errNotMetadataPath for a request the fast path does not handle exactly (another plan, a
// repeated key, a null map): the caller takes the general path.
func (rn *call) undoMetadata(ctx context.Context, c *chain, raw []byte, p undo.Plan) (o outcome, dropped string, err error) {
	if len(c.hooks) > 0 && !c.metadataOnly() || !p.OnMetadataMaps() {
		return outcome{}, "", errNotMetadataPath
	}
	doc, err := c.parseMetadata(raw, rn.validJSON, rn.topOf(raw))
	if err != nil {
		return outcome{}, "", err
	}
	var stored [2]map[string]string
	for i, f := range doc.maps {
		if f.start >= 0 && f.value == nil || f.dups {
			return outcome{}, "", errNotMetadataPath
		}
		stored[i] = f.value // nil: absent
	}
	if stored[1] == nil { // the plan removes the annotation first: it is there (runUndoRead)
		return outcome{}, "", errNotMetadataPath
	}
	after, res := p.ViewMaps(ctx, stored)
	rn.observeUndoSkipped(c.key, res.Skipped)
	dropped = res.Reason
	if len(c.hooks) > 0 {
		m, err := c.metadataHooked(ctx, rn, doc.namespace, after)
		if err != nil {
			return outcome{}, dropped, err
		}
		after, o.hooks = [2]map[string]string{m.Labels, m.Annotations}, len(c.hooks)
	}
	if dropped != "" && len(c.hooks) == 0 {
		return o, dropped, nil
	}
	o.ops, o.merge, err = doc.answer(after)
	return o, dropped, err
}

// OpenedUndo returns the entries of the undo that the object raw (JSON) of kind gvk carries,
// opened under the one rule as a read of hook type t's side opens it (undo.Rule.Opened, with
// the registry's keys); false when it carries none. For `synchook test`.
func (r *Registry) OpenedUndo(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) ([]undo.Entry, bool, error) {
	return r.rule(Key{GVK: gvk, Type: t}).Opened(gvk, t.Side(), raw)
}
