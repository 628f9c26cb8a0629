package engine

// Automatic undo is package undo's (its doc says what it holds and why a tenant cannot steer
// any of it). The engine asks it three things: before a write, undo.Rule.Rewrite (runRestored);
// after the compare, the record (call.record, recordMetadataUndo); on a read, undo.Plan.Read or
// ViewMaps (runUndoRead, undoMetadata). This file is what the engine hands it: the rule's
// inputs from the Registry, the seal of a chain and the object's facts from the request's scan.

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// rule returns the one rule's inputs for the chains of key's kind and side (undo.Rule): the
// keys, the size bound, and the writers of the kind's Update chain of that side when it
// records an undo (its next write puts back whatever an undo of theirs takes off).
func (r *Registry) rule(key Key) undo.Rule {
	rule := undo.Rule{Ring: r.opts.Keys.Ring(), MaxBytes: r.opts.MaxUndoBytes}
	if wc := r.chains[Key{GVK: key.GVK, Type: key.Type.UpdateOf()}]; wc != nil && r.recordsUndo(wc) {
		rule.Rewriters = wc.writers
	}
	return rule
}

// seal returns the annotation value for entries recorded by the write chain c on the object
// id, after the carried entries carry (undo.Rule.Seal), and notes the sealed kind. Errors: a
// *HookError of c wrapping undo.ErrNeedsKey or undo.ErrTooLarge.
func (r *Registry) seal(c *chain, id undo.Identity, entries, carry []undo.Entry) (string, error) {
	side := c.key.Type.Side()
	value, err := undo.Rule{Ring: r.opts.Keys.Ring(), MaxBytes: r.opts.MaxUndoBytes}.Seal(id, side, c.writers, entries, carry)
	if err != nil {
		return "", &failure.HookError{Hook: c.names(), Type: c.key.Type, GVK: c.key.GVK, Err: err}
	}
	r.opts.Keys.NoteSealed(c.key.GVK, side)
	return value, nil
}

// subjectOf is undo.SubjectIn for the object raw of the call, read from what checkInput found
// when raw is the request's object (no scan of the whole object), with doc as its Doc.
func (r *call) subjectOf(key Key, raw []byte, doc *jsondoc.Doc) undo.Subject {
	immutable, _ := r.recordOf(raw).TopMember("immutable")
	return undo.SubjectIn(r.identityOf(key, raw), key.GVK, key.Type.Side(), string(immutable), doc)
}

// undoAnnotationOf is undo.AnnotationIn for the object raw of the call, read in its metadata
// (its record's).
func (r *call) undoAnnotationOf(raw []byte) (string, bool) {
	meta, ok := r.recordOf(raw).Meta()
	if !ok {
		return "", false
	}
	return undo.AnnotationIn(meta)
}

// record returns ops (the write chain c's patch of raw) followed by the operation that records
// their undo (undo.RecordOps; whole: the entries may be read on the hooked object), sealed for
// raw's identity after the call's carried entries, and the value written ("": none needed). ok
// is false, nothing recorded, where the entries need the hooked object and whole is not set.
// Errors: a *HookError of c (undo.ErrNeedsKey, undo.ErrTooLarge); ops that do not apply to raw.
func (r *call) record(c *chain, raw []byte, ops []patch.Operation, whole bool) ([]patch.Operation, string, bool, error) {
	rec := r.recordOf(raw)
	meta, hasMeta := rec.Meta()
	out, value, ok, err := undo.RecordOps(raw, rec.Indexed(), meta, hasMeta, rec.Annotations(), ops, whole, func(entries []undo.Entry) (string, error) {
		return r.reg.seal(c, r.identityOf(c.key, raw), entries, r.carry)
	})
	if err != nil {
		if hookErr := (*failure.HookError)(nil); !errors.As(err, &hookErr) { // the patch did not apply
			err = fmt.Errorf("%s: %w", c.key, err)
		}
	}
	return out, value, ok, err
}

// identityOf is undo.IdentityIn for the object raw of the call, of key's kind and side, read in
// its metadata (its record's; the request's from the members its check read).
func (r *call) identityOf(key Key, raw []byte) undo.Identity {
	rec := r.recordOf(raw)
	if mm, ok := rec.MetaMembers(); ok { // the check read them: no walk of metadata
		return mm.Identity(key.GVK, key.Type.Side())
	}
	meta, _ := rec.Meta()
	return undo.IdentityIn(key.GVK, key.Type.Side(), meta)
}

// resealer returns the seal of the entries a read view of the stored object raw carries, read
// by the read chain c: sealed alone, as the kind's Update chain seals them (undo.Plan.View).
func (rn *call) resealer(c *chain, raw []byte) func([]undo.Entry) (string, error) {
	return func(carry []undo.Entry) (string, error) {
		wc := rn.reg.chains[Key{GVK: c.key.GVK, Type: c.key.Type.UpdateOf()}]
		if wc == nil {
			wc = &chain{key: c.key}
		}
		return rn.reg.seal(wc, rn.identityOf(wc.key, raw), nil, carry)
	}
}

// undoMetadata is undo.Plan.Read and the answer for an undo whose plan is on the labels and
// annotations alone (undo.Plan.OnMetadataMaps) and whose read chain's own hooks, if any, are
// MetadataHooks: undo.Plan.ViewMaps, no decode of the object, no JSON Patch apply; res is the
// undo's. done is false, nothing done, for a request the maps alone do not give exactly (the
// opened undo touches more, a repeated key, a null map): the caller reads the whole document.
func (rn *call) undoMetadata(ctx context.Context, c *chain, rec *intake.Record, p undo.Plan) (o outcome, res undo.Result, done bool, err error) {
	if len(c.hooks) > 0 && !c.metadataOnly() || !p.OnMetadataMaps() || rec.Facts().Repeats {
		return outcome{}, res, false, nil
	}
	doc, err := c.metadataDoc(rec)
	if err != nil {
		return outcome{}, res, true, err
	}
	var stored [2]map[string]string
	for i, f := range doc.maps {
		if f.present && f.value == nil || f.dups {
			return outcome{}, res, false, nil
		}
		stored[i] = f.value // nil: absent
	}
	if stored[1] == nil { // the plan removes the annotation first: it is there (runUndoRead)
		return outcome{}, res, false, nil
	}
	after, res := p.ViewMaps(ctx, stored)
	if len(c.hooks) > 0 {
		m, err := c.metadataHooked(ctx, rn, doc.namespace, after)
		if err != nil {
			return outcome{}, res, true, err
		}
		after, o.hooks = [2]map[string]string{m.Labels, m.Annotations}, len(c.hooks)
	} else if res.Reason != "" {
		return o, res, true, nil
	}
	o.ops, err = doc.answer(after)
	return o, res, true, err
}

// OpenedUndo returns the entries of the undo that the object raw (JSON) of kind gvk carries,
// opened under the one rule as a read of hook type t's side opens it (undo.Rule.Opened, with
// the registry's keys); false when it carries none. For `synchook test`.
func (r *Registry) OpenedUndo(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) ([]undo.Entry, bool, error) {
	return r.rule(Key{GVK: gvk, Type: t}).Opened(gvk, t.Side(), raw)
}
