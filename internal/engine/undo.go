package engine

// Automatic undo, and why a tenant cannot steer it.
//
// A write chain (CreatePhysical, UpdatePhysical, CreateVirtual, UpdateVirtual) records in
// UndoAnnotation how to go back from the hooked object to the object the syncer sent; the
// paired read type (GetPhysical, GetVirtual) applies it, so the syncer never sees the hooks'
// change come back and never fights it. The entries, the seal, the rule of what may be applied
// and the one applier are package undo's; this file and sealed.go ask it.
//
// The annotation travels on the object, and everything on an object may have been written by
// the tenant (the tenant model in the README): a tenant who sets synchook.io/undo on a virtual
// object gets it copied to the host by the syncer. So nothing is applied unless it is sealed
// and opens with synchook's key for this object (undo.Rule): clear text never, whatever it
// holds, and no chain is re-run to "verify" anything.
//
// No undo can change identity: an entry that addresses apiVersion, kind, name, namespace or
// uid drops the whole annotation. An entry whose path no longer holds what the hooks wrote is
// skipped, never forced.
//
// Work is bounded whatever the annotation holds: its value is at most MaxUndoBytes as stored
// (which bounds the entries), the entries are applied as edits on the request's object
// (jsondoc.Doc: only the members on their paths are read, each once, and the rest of the bytes
// copied, whatever their number), under the request's context and a concurrency slot. An annotation that is too large, clear text, unauthentic, malformed or touches
// identity is dropped and counted (UndoObserver; synchook_undo_rejected_total{reason}); the
// read never fails because of it.
//
// On the write side the reserved annotations (UndoAnnotation, ProvenanceAnnotation) are
// synchook's alone: a write chain takes them off the object before its hooks run, so what a
// tenant wrote there never reaches the host as written; the removal is part of the recorded
// undo, so the reader gets the tenant's value back and sees no difference to "fix". An undo
// synchook wrote itself (it opens) is applied first instead on an Update (sealed.go,
// ownUndo): never nested.

import (
	"context"
	"encoding/json"
	"errors"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// UndoAnnotation is the annotation in which a write chain records how to restore the object
// the syncer sent (RegistryOptions.Undo): undo.Annotation.
const UndoAnnotation = undo.Annotation

// DefaultMaxUndoBytes bounds the value of UndoAnnotation as stored (RegistryOptions.MaxUndoBytes):
// undo.DefaultMaxBytes, 16 KiB.
const DefaultMaxUndoBytes = undo.DefaultMaxBytes

// ErrUndoTooLarge is the cause of a HookError when the undo of a chain's change would not fit
// in DefaultMaxUndoBytes (RegistryOptions.MaxUndoBytes): the chain's change is refused (422),
// since it could not be taken back on the way up.
var ErrUndoTooLarge = errors.New("the change is too large to record its undo")

// The reasons for which a read drops an UndoAnnotation (UndoObserver).
const (
	// UndoTooLarge: undo.ReasonTooLarge.
	UndoTooLarge = undo.ReasonTooLarge
	// UndoMalformed: undo.ReasonMalformed.
	UndoMalformed = undo.ReasonMalformed
	// UndoIdentity: undo.ReasonIdentity.
	UndoIdentity = undo.ReasonIdentity
	// UndoDeadline: undo.ReasonDeadline.
	UndoDeadline = undo.ReasonDeadline
)

// UndoObserver is told when a read chain drops an UndoAnnotation, with one of the reasons
// above (a Runner's Observer that also implements it: metrics.Recorder counts them).
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

// UndoEntry is one change of a write chain and how to take it back (undo.Entry).
type UndoEntry = undo.Entry

// ProvenanceAnnotation and UndoAnnotation are reserved: a write chain removes what the object
// brings of them before its hooks run.
var reservedAnnotations = [...]string{UndoAnnotation, ProvenanceAnnotation}

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

// undoView applies the plan p (steps that open, carried entries) to doc, the stored object raw
// that the read chain c hands on: its edits take the undo off, and the carried entries stay
// recorded on it, sealed as the kind's Update chain seals them alone (so that a view of an
// object that holds only these entries is the object itself). It returns why the undo is
// dropped ("" when it was applied); doc is then half-edited and must be dropped.
func (rn *call) undoView(ctx context.Context, c *chain, raw []byte, doc *jsondoc.Doc, p undo.Plan) string {
	res := undo.Apply(ctx, doc, p.Steps)
	if res.Reason != "" {
		return res.Reason
	}
	rn.observeUndoSkipped(c.key, res.Skipped)
	if patch.Guard("", doc.Ops()) != nil { // cannot happen: undo's plans refuse identity paths
		return UndoIdentity
	}
	if len(p.Carry) > 0 {
		wc := rn.reg.chains[Key{GVK: c.key.GVK, Type: c.key.Type.UpdateOf()}]
		if wc == nil {
			wc = &chain{key: c.key}
		}
		if value, err := rn.sealUndo(wc, raw, nil, p.Carry); err == nil {
			if !setAnnotation(doc, UndoAnnotation, value) {
				return UndoMalformed
			}
		}
	}
	return ""
}

// setAnnotation sets the annotation key to value on doc, making the annotations map when it is
// absent (or not a map); false when metadata is not an object (undo.Tree.SetAnnotation).
func setAnnotation(doc *jsondoc.Doc, key, value string) bool {
	meta, _ := doc.Lookup([]string{"metadata"})
	if _, ok := meta.(map[string]any); !ok {
		return false
	}
	if ann, _ := doc.Lookup([]string{"metadata", "annotations"}); ann != nil {
		if _, ok := ann.(map[string]any); ok {
			ok, err := doc.Set([]string{"metadata", "annotations", key}, value)
			return ok && err == nil
		}
	}
	ok, err := doc.Set([]string{"metadata", "annotations"}, map[string]any{key: value})
	return ok && err == nil
}

func applyOps(doc []byte, ops ...patch.Operation) ([]byte, error) {
	p, err := patch.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return patch.Apply(doc, p)
}

// undoAnnotationIn returns the value of UndoAnnotation in the metadata object meta.
func undoAnnotationIn(meta []byte) (string, bool) {
	ann, _, ok := jsonscan.Find(meta, "annotations")
	if !ok {
		return "", false
	}
	m, _, ok := jsonscan.Find(ann.Value, UndoAnnotation)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(m.Value, &s) != nil {
		return "", false
	}
	return s, true
}
