package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/answer"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/metamap"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// Result is the outcome of one chain run.
type Result struct {
	// Patch is the RFC 6902 JSON Patch (a JSON array) that turns the request object into the
	// hooked object; nil when no hook changed anything or no hook is registered.
	Patch []byte
	// Operations is the number of operations in Patch.
	Operations int
	// Hooks is the number of hooks that ran.
	Hooks int

	raw []byte
	ops []patch.Operation
	// answer is the answer when the chain made it in passing (the request with the label and
	// annotation maps replaced; a typed object's one encoding, where mergeSafe); doc the
	// request's object as the chain edited it, when it kept one (an undo read); goType the Go
	// type of the kind, which answer.Of encodes along.
	answer []byte
	doc    *jsondoc.Doc
	goType reflect.Type
	// metadata is the request object's metadata member as intake found it (nil: none).
	metadata []byte
}

// Answer returns the JSON that answers a vcluster plugin's Mutate: decoded with encoding/json's
// Unmarshal INTO the object the request was decoded from (the way vcluster reads it), and also
// into a new one, it gives exactly the hooked object (package answer). nil when nothing changed.
// It never decodes the whole object: it is the chain's own encoding where the chain made one
// that a merging decoder reads right, else the request's bytes with the chain's edits, encoded
// along the kind's Go type (answer.Of). Errors: an edit that does not apply (a bug) or a value
// that does not encode.
func (r Result) Answer() ([]byte, error) {
	if r.Patch == nil {
		return nil, nil
	}
	if r.answer != nil {
		return r.answer, nil
	}
	doc, err := r.edited()
	if err != nil {
		return nil, err
	}
	return answer.Of(r.goType, doc)
}

// Object returns the request object with Patch applied: the request bytes themselves when
// nothing changed, else those bytes with the chain's edits (computed on each call; the
// admission transport never needs it).
func (r Result) Object() ([]byte, error) {
	if r.Patch == nil {
		return r.raw, nil
	}
	doc, err := r.edited()
	if err != nil {
		return nil, err
	}
	return doc.Bytes()
}

// edited returns the request's object with the chain's edits: the chain's own Doc, else a Doc
// of the request with the operations applied.
func (r Result) edited() (*jsondoc.Doc, error) {
	if r.doc != nil {
		return r.doc, nil
	}
	doc := jsondoc.New(r.raw)
	if err := doc.ApplyOps(r.ops); err != nil {
		return nil, fmt.Errorf("apply the hooks' patch: %w", err)
	}
	return doc, nil
}

// HookError is returned by Mutate when a hook fails: it returned an error, panicked, outlived the
// request deadline, returned an object of another kind, or changed a protected field.
type HookError struct {
	// Hook is the name of the hook, Type its hook type and GVK the kind of the object.
	Hook string
	Type hooks.HookType
	GVK  schema.GroupVersionKind
	// Err is the cause: the hook's own error, a *PanicError, context.DeadlineExceeded (or
	// Canceled), ErrWrongKind or a *patch.ForbiddenPathError. For a Secret or SecretList, a
	// *WithheldError stands in for the hook's own error and panic.
	Err error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("hook %q %s %s: %v", e.Hook, e.Type, e.GVK.Kind, e.Err)
}

func (e *HookError) Unwrap() error { return e.Err }

// PanicError is the cause of a HookError when the hook panicked. Value is the panic value as
// text; Stack is the goroutine stack, for logs only (never sent to callers).
type PanicError struct {
	Value string
	Stack []byte
}

func (e *PanicError) Error() string { return "panic: " + e.Value }

// ErrWrongKind is the cause of a HookError when a hook returns nil or an object of another Go
// type or GVK than it was given.
var ErrWrongKind = errors.New("hook returned a different kind of object")

// DecodeError is returned by Mutate when the request object (or its old object: Old) is not
// valid JSON for its GVK, or (Err an *InputError) is of another kind or has keys that readers
// could take differently.
type DecodeError struct {
	GVK schema.GroupVersionKind
	// Old says the error is about the request's old object (MutateOptions.OldObject), not its
	// object; errors.Is then finds hooks.ErrMalformedOldObject.
	Old bool
	Err error
}

func (e *DecodeError) Error() string {
	what := "object"
	if e.Old {
		what = "old object"
	}
	return fmt.Sprintf("decode %s %s: %v", e.GVK.Kind, what, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Is reports whether target is hooks.ErrMalformedOldObject and e is about the old object.
func (e *DecodeError) Is(target error) bool {
	return e.Old && target == hooks.ErrMalformedOldObject //nolint:errorlint // a sentinel, compared as errors.Is does
}

// Failure is what kind of failure an error of Runner.Mutate is, for transports, which each map
// it to their own codes (webhook: HTTP statuses, internal/bridge: gRPC codes); it carries no
// code of any protocol.
type Failure int

// The kinds of Failure, in the order Classify checks them.
const (
	// NoFailure: the error is nil.
	NoFailure Failure = iota
	// Invalid: the object (or the old object) is not valid JSON for its kind, or ambiguous
	// (*DecodeError, hooks.ErrMalformedOldObject).
	Invalid
	// Protected: a hook changed apiVersion, kind, name, namespace or uid, or its change's undo
	// was too large or would hold a Secret value without a key (patch.ErrForbiddenPath,
	// undo.ErrTooLarge, undo.ErrNeedsKey).
	Protected
	// Overloaded: every concurrency slot was busy; no hook ran (ErrOverloaded).
	Overloaded
	// Canceled: the caller went away while a hook ran (context.Canceled).
	Canceled
	// Deadline: a hook was still running at the deadline (context.DeadlineExceeded).
	Deadline
	// Crashed: a hook panicked or returned another kind of object (*PanicError, ErrWrongKind).
	Crashed
	// APIStatus: a hook returned a Kubernetes API status error; Classify also returns its code.
	APIStatus
	// Refused: a hook returned any other error: it refused the object.
	Refused
	// Internal: an error that is none of the above (not a hook's: synchook's own).
	Internal
)

// Classify returns the Failure of an error of Runner.Mutate and, for APIStatus, the HTTP
// status code of the Kubernetes status error a hook returned (0 otherwise).
func Classify(err error) (Failure, int32) {
	if err == nil { // before the targets below, which escape to the heap
		return NoFailure, 0
	}
	var (
		decodeErr *DecodeError
		hookErr   *HookError
		panicErr  *PanicError
		apiStatus apierrors.APIStatus
	)
	switch {
	case errors.As(err, &decodeErr), errors.Is(err, hooks.ErrMalformedOldObject):
		return Invalid, 0
	case errors.Is(err, patch.ErrForbiddenPath), errors.Is(err, undo.ErrTooLarge), errors.Is(err, undo.ErrNeedsKey):
		return Protected, 0
	case errors.Is(err, ErrOverloaded):
		return Overloaded, 0
	case errors.Is(err, context.Canceled):
		return Canceled, 0
	case errors.Is(err, context.DeadlineExceeded):
		return Deadline, 0
	case errors.As(err, &panicErr), errors.Is(err, ErrWrongKind):
		return Crashed, 0
	case errors.As(err, &apiStatus) && apiStatus.Status().Code != 0:
		return APIStatus, apiStatus.Status().Code
	case errors.As(err, &hookErr):
		return Refused, 0
	default:
		return Internal, 0
	}
}

// Mutate runs the chain of (gvk, t) on the JSON object raw and returns the JSON Patch from raw to
// the hooked object.
//
// One object per request: raw is scanned once at intake (checkInput: its top-level members,
// metadata, identity and undo value, which every later stage reads instead of scanning raw
// again, and which seed the request's index); a chain of label/annotation hooks works on the
// two maps alone; any other chain decodes raw once (into the scheme's type, or Unstructured for
// unknown kinds), runs every hook in registration order on it and compares the result once
// with a deep copy of the decoded object (patch.DiffTyped: the typed round trip of raw, so
// fields the compiled types do not know are never touched), moving the operations onto raw
// (patch.RebaseVia); an undo read or an Update's own-undo step edits raw itself
// (jsondoc.Doc). The answer a vcluster plugin sends is made from the same work
// (Result.Answer): no stage decodes the object again. No hooks, or no change, gives a Result
// with a nil Patch.
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
	top, err := rn.reg.checkInput(gvk, t, raw, rn.validJSON) // before any chain reads it: input.go
	if err != nil {
		return Result{}, err
	}
	rn.top = top
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
	res := Result{raw: raw, ops: o.ops, Hooks: o.hooks, Operations: len(o.ops), answer: o.merge, doc: o.doc, metadata: top.metadata}
	if c := rn.reg.chains[Key{GVK: gvk, Type: t}]; c != nil {
		res.goType = c.objectType
	}
	if res.Patch, err = patch.Marshal(o.ops); err != nil {
		return Result{}, err
	}
	return res, nil
}

// outcome is what one chain run gives: the operations of the patch from the request object to
// the hooked one (nil: no change), the number of hooks that ran, and the merge answer when it
// was cheap to make (Result.Answer).
type outcome struct {
	ops   []patch.Operation
	hooks int
	merge []byte
	// sealed says ops end with the operation that records the undo and merge holds it too
	// (runTyped sealed it onto the hooked object).
	sealed bool
	// doc is the request's object with ops made on it, when the chain edited one (an undo
	// read): the answer is encoded from it.
	doc *jsondoc.Doc
}

// runOps is Mutate for one object: it returns the operations of the patch from raw to the hooked
// object (nil when nothing changed), the number of hooks that ran and, when it could make it
// cheaply, the merge answer (Result.Answer).
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

// runChain is runOps for a chain without an undo to apply first.
func (rn *call) runChain(ctx context.Context, c *chain, raw []byte) (outcome, error) {
	if _, write := c.key.Type.ReadOf(); write && rn.reg.opts.Undo && !rn.keepOwnUndo && rn.mayCarryUndo(raw) {
		if o, own, err := rn.runRestored(ctx, c, raw); own {
			return o, err
		}
	}
	records := rn.reg.recordsUndo(c)
	if c.metadataOnly() && !rn.reg.marksProvenance(c) {
		ops, merge, err := c.runMetadata(ctx, rn, raw, records)
		if !errors.Is(err, errNotMetadataPath) {
			if err != nil {
				return outcome{}, err
			}
			return outcome{ops: ops, hooks: len(c.hooks), merge: merge}, nil
		}
	}
	if c.stripOnly() && !rn.reg.marksProvenance(c) {
		o, err := rn.runStripDoc(ctx, c, raw, records)
		if !errors.Is(err, errNotDocPath) {
			return o, err
		}
	}
	o, err := runTyped(ctx, rn, c, raw, records)
	if err != nil || len(o.ops) == 0 {
		return outcome{ops: o.ops, hooks: o.hooks}, err
	}
	if records && !o.sealed {
		if err := stepBoundary(ctx, c); err != nil {
			return outcome{}, err
		}
		o.ops, _, _, err = rn.record(c, raw, o.ops, true)
		o.merge = nil
		return o, err
	}
	if !mergeSafe(o.ops) {
		o.merge = nil
	}
	return o, nil
}

// runRestored is runChain for a write that brings an undo synchook wrote itself
// (undo.Rule.Rewrite under the read rule of c's side): the chain runs on the object with
// that undo applied, recording only the new change. own is false when raw brings no such undo
// (on a Create, always): whatever is there is the tenant's, and runChain goes on.
func (rn *call) runRestored(ctx context.Context, c *chain, raw []byte) (o outcome, own bool, err error) {
	value, had := rn.undoAnnotationOf(raw) // runChain's caller gate (mayCarryUndo) looked for the marker
	if !had {
		return outcome{}, false, nil
	}
	if err := checkJSON(c.key.GVK, raw, rn.validJSON); err != nil { // the Doc splits only what it reads
		return outcome{}, true, err
	}
	doc := jsondoc.New(raw)
	read, _ := c.key.Type.ReadOf() // runChain calls runRestored for a Create or an Update only
	readKey := Key{GVK: c.key.GVK, Type: read}
	var theirs error // the chain's and the seal's errors, which go out as they are
	run := func(restored []byte, carry []undo.Entry) ([]patch.Operation, error) {
		in := *rn // the chain records the carried entries before its own
		in.carry = carry
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

// runUndoRead is runOps for a read chain that first applies the undo recorded by its kind's
// write chains (RegistryOptions.Undo), then runs its own hooks on the restored view. The
// patch goes from raw to the final object. An undo that is not synchook's (undo.Rule) is dropped and
// counted, never an error. The undo and the hooks run under one concurrency slot;
// an undo of labels and annotations only works on the two maps alone (undoMetadata), any other
// on the request's object as a jsondoc.Doc (undo.Plan.Read): its edits are the patch and the answer
// is encoded from it, so the object is neither decoded whole nor encoded again.
// An object without the annotation goes to the hooks as it is, which validate it.
func (rn *call) runUndoRead(ctx context.Context, c *chain, raw []byte) (outcome, error) {
	value, had := rn.undoAnnotationOf(raw)
	if !had {
		if len(c.hooks) == 0 {
			return outcome{}, checkJSON(c.key.GVK, raw, rn.validJSON)
		}
		return rn.runChain(ctx, c, raw)
	}
	inner, done, ok := rn.hold()
	if !ok {
		return outcome{}, fmt.Errorf("%s: %w", c.key, ErrOverloaded)
	}
	defer done()
	if err := checkJSON(c.key.GVK, raw, rn.validJSON); err != nil { // the Doc splits only what it reads
		return outcome{}, err
	}
	doc := jsondoc.New(raw)
	plan := rn.reg.rule(c.key).PlanRead(rn.subjectOf(c.key, raw, doc), value)
	if plan.Reason == "" {
		o, res, err := inner.undoMetadata(ctx, c, raw, plan)
		if !errors.Is(err, errNotMetadataPath) {
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

// mergeSafe reports whether a merging decoder (encoding/json into an existing object) applies
// ops exactly when given the whole hooked object: every operation adds a member to an object
// (its last token is not an array index) or replaces a scalar.
func mergeSafe(ops []patch.Operation) bool {
	for _, op := range ops {
		switch op.Operation {
		case "add":
			last := op.Path[strings.LastIndexByte(op.Path, '/')+1:]
			if last == "-" || strings.Trim(last, "0123456789") == "" {
				return false
			}
		case "replace":
			switch v := op.Value.(type) {
			case string, bool, float64, int64, nil:
			case json.RawMessage:
				if len(v) == 0 || v[0] == '{' || v[0] == '[' {
					return false
				}
			default:
				return false
			}
		default:
			return false
		}
	}
	return true
}

// runTyped is runOps on the typed (or Unstructured) object: one decode of raw, the hooks, one
// compare and at most one encode. For a typed object the compare is patch.DiffTyped of a deep
// copy of the decoded object and the hooked one (no encoding of either whole); when records is
// set it also seals the undo onto the hooked object (outcome.sealed); the hooked object is
// encoded, as the answer (outcome.merge), only where a merging decoder reads that encoding
// right (mergeSafe), else the answer is made from the request's bytes and the patch. An
// Unstructured object is encoded before and after and the encodings diffed.
func runTyped(ctx context.Context, rn *call, c *chain, raw []byte, records bool) (outcome, error) {
	gvk := c.key.GVK
	obj := c.newObject()
	if err := decode(raw, obj); err != nil {
		return outcome{}, &DecodeError{GVK: gvk, Err: err}
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
	out, err := c.exec(ctx, rn, obj) // a hook's error on a Secret is withheld already (hookFailure)
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
		if before = c.newObject(); decode(raw, before) != nil {
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
		return outcome{}, &HookError{Hook: c.names(), Type: c.key.Type, GVK: gvk, Err: err}
	}
	if err := stepBoundary(ctx, c); err != nil {
		return outcome{}, err
	}
	if ops, err = patch.RebaseVia(raw, rn.indexOf(raw).LookupUnique, ops); err != nil {
		return outcome{}, fmt.Errorf("%s: %w", c.key, err)
	}
	o := outcome{ops: ops, hooks: len(c.hooks)}
	if records { // on out itself, so that its one encoding is the hooked object with its undo
		var value string
		if o.ops, value, o.sealed, err = rn.record(c, raw, o.ops, false); err != nil {
			return outcome{}, err
		} else if value != "" {
			out.SetAnnotations(undo.SetIn(maps.Clone(out.GetAnnotations()), value)) // never the hook's own map
		}
	}
	if records && !o.sealed || !mergeSafe(o.ops) {
		return o, nil // the answer is encoded from the request and the patch (Result.Answer)
	}
	if o.merge, err = json.Marshal(out); err != nil {
		return outcome{}, fmt.Errorf("encode %s after hooks: %w", gvk.Kind, err)
	}
	return o, nil
}

// runLight is runTyped's compare for a chain whose hooks change only labels and annotations
// (chainStats): before holds the two maps as decoded, out is the hooked object. It encodes out
// once and diffs that with raw itself (metadataOps: raw is the request's JSON, so no rebase);
// when more than the two maps differ it reports false and the caller compares the whole object.
// The undo, when records is set, is sealed into the encoding (undo.SpliceAnnotation), which is the
// answer where a merging decoder reads it right.
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
	o := outcome{ops: ops, hooks: len(c.hooks), merge: after}
	if len(ops) == 0 {
		return outcome{hooks: len(c.hooks)}, true, nil
	}
	if records {
		var value string
		var sealed bool
		o.ops, value, sealed, err = rn.record(c, raw, o.ops, false) // identity as the request has it (only the maps changed)
		if err != nil || !sealed {
			return outcome{}, sealed, err // not sealed: the whole compare records it
		}
		o.sealed = true
		if value != "" {
			if o.merge = undo.SpliceAnnotation(after, value); o.merge == nil {
				return outcome{}, false, nil
			}
		}
	}
	if !mergeSafe(o.ops) {
		o.merge = nil
	}
	return o, true, nil
}

// errNotDocPath is runStripDoc's answer for a request it does not handle exactly: runChain
// takes the typed path.
var errNotDocPath = errors.New("not for the document path")

// stripStepEvery is how many removals of one strip path runStripDoc makes between two step
// boundaries (a Wildcard makes one per element).
const stripStepEvery = 256

// runStripDoc is runChain for a chain of strip hooks only (the document path): their paths are
// removed from the request's object as a jsondoc.Doc — no decode, no compare, no encode: the
// removals are the patch (and the undo's record) and the answer is encoded from the Doc. Each
// path is removed one concrete path at a time (builtin.ConcretePaths; each removal from a
// split array costs the same, so a Wildcard is linear in its elements), with a step boundary
// before each hook and every stripStepEvery removals. Each hook's filter is judged on the
// namespace and the labels as they are when it runs. Like the label/annotation fast path it
// checks the JSON and metadata (checkInput), not the rest of the kind's schema: a removal
// cannot make an object the schema refuses. errNotDocPath where the undo would need the whole
// object (a removal of metadata's annotations as a whole).
func (rn *call) runStripDoc(ctx context.Context, c *chain, raw []byte, records bool) (outcome, error) {
	if err := checkJSON(c.key.GVK, raw, rn.validJSON); err != nil {
		return outcome{}, err
	}
	if rn.topOf(raw) == nil || rn.top.metadata == nil || rn.top.metadata[0] != '{' {
		return outcome{}, errNotDocPath // the request's own object, with metadata: what the rest reads
	}
	doc := jsondoc.New(raw)
	if _, write := c.key.Type.ReadOf(); write { // the reserved annotations are synchook's (undo.DropReserved)
		for _, k := range undo.Reserved {
			doc.Remove([]string{"metadata", "annotations", k})
		}
	}
	namespace, _ := doc.Lookup([]string{"metadata", "namespace"})
	ns, _ := namespace.(string)
	for _, h := range c.hooks {
		if err := stepBoundary(ctx, c); err != nil {
			return outcome{}, err
		}
		if h.stripMatches != nil && !h.stripMatches(ns, docLabels(doc)) {
			continue
		}
		for _, path := range h.strip {
			removals := 0
			for tokens := range builtin.ConcretePaths(path, doc.Len) {
				if removals++; removals%stripStepEvery == 0 {
					if err := stepBoundary(ctx, c); err != nil {
						return outcome{}, err
					}
				}
				if !doc.Remove(tokens) && !absentIn(doc, tokens) {
					return outcome{}, errNotDocPath // a scalar where the path goes on: the typed decode judges it
				}
			}
		}
	}
	if !doc.Changed() {
		return outcome{hooks: len(c.hooks)}, nil
	}
	ops := doc.Ops()
	if records {
		n := len(ops)
		ops, value, sealed, err := rn.record(c, raw, ops, false)
		if err != nil {
			return outcome{}, err
		}
		if !sealed {
			return outcome{}, errNotDocPath
		}
		if value != "" {
			if err := doc.ApplyOps(ops[n:]); err != nil { // the undo's own operation, on the Doc too
				return outcome{}, fmt.Errorf("%s: %w", c.key, err)
			}
		}
	}
	return outcome{ops: doc.Ops(), hooks: len(c.hooks), doc: doc}, nil
}

// absentIn reports whether the path tokens is absent from doc the way the typed strip finds
// it absent too: its deepest existing parent is an object, an array or null. A scalar there
// (a "spec" written as a string) is what the typed decode refuses, so the document path leaves
// that judgement to it.
func absentIn(doc *jsondoc.Doc, tokens []string) bool {
	for i := len(tokens) - 1; i >= 0; i-- {
		if k, ok := doc.Kind(tokens[:i]); ok {
			return k == '{' || k == '[' || k == 'n'
		}
	}
	return true
}

// docLabels returns the labels of doc's object as they are now (nil: none).
func docLabels(doc *jsondoc.Doc) map[string]string {
	v, _ := doc.Lookup([]string{"metadata", "labels"})
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, _ := x.(string)
		out[k] = s
	}
	return out
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
		return outcome{}, &HookError{Hook: c.names(), Type: c.key.Type, GVK: gvk, Err: err}
	}
	if err := stepBoundary(ctx, c); err != nil {
		return outcome{}, err
	}
	if ops, err = patch.Rebase(raw, ops); err != nil {
		return outcome{}, fmt.Errorf("%s: %w", c.key, err)
	}
	return outcome{ops: ops, hooks: len(c.hooks), merge: after}, nil
}

// stepBoundary returns an error wrapping ctx.Err() once ctx has ended: the work of a request
// stops there, between two steps that cannot be interrupted (a decode, an encode, a diff), and
// frees its slot (Runner.runWhole has answered already).
func stepBoundary(ctx context.Context, c *chain) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: stopped between steps: %w", c.key, err)
	}
	return nil
}

// onlyMetadataMaps reports whether every operation of ops is on metadata's labels or
// annotations (the maps or one of their entries).
func onlyMetadataMaps(ops []patch.Operation) bool {
	for _, op := range ops {
		if _, _, _, ok := metamap.Target(op.Path); !ok {
			return false
		}
	}
	return true
}

// names returns the chain's hook names joined by ",", for errors that no single hook owns.
func (c *chain) names() string {
	s := ""
	for i, h := range c.hooks {
		if i > 0 {
			s += ","
		}
		s += h.name
	}
	return s
}

// exec runs the hooks on obj in order and returns the last object. When ctx can end, the hooks
// run on their own goroutine so that a hook that does not return is abandoned when ctx ends;
// the abandoned goroutine owns obj from then on and its result is dropped.
func (c *chain) exec(ctx context.Context, rn *call, obj client.Object) (client.Object, error) {
	var out client.Object
	err := c.supervise(ctx, rn, func(running *atomic.Int32) error {
		o, err := c.runHooks(ctx, rn, obj, running)
		out = o
		return err
	})
	if err != nil {
		return nil, err // out may still be written by an abandoned run: never read it
	}
	return out, nil
}

// supervise runs work — the chain's hooks in order, setting running to the index of the hook
// being called — in one concurrency slot of rn. When ctx can end, work runs on its own
// goroutine and is abandoned when ctx ends: the error then names the hook still running, and
// the abandoned goroutine keeps the slot (and owns whatever work touches) until it returns.
// A chain of builtin hooks (RegisterBuiltin), which return promptly, runs on the caller's
// goroutine.
func (c *chain) supervise(ctx context.Context, rn *call, work func(running *atomic.Int32) error) error {
	release, ok := rn.acquire()
	if !ok {
		return fmt.Errorf("%s: %w", c.key, ErrOverloaded)
	}
	run := &hookRun{}
	if ctx.Done() == nil || c.inline() {
		defer release()
		return work(&run.running)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		// The slot is held until the hooks really return, even when abandoned, and freed
		// before the answer, so that a caller's next request finds it free.
		defer func() { run.end(); release(); done <- err }()
		err = work(&run.running)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		run.abandon(rn.slots, c) // Runner.Stuck names the hook until it returns
		h := c.hooks[run.running.Load()]
		return &HookError{
			Hook: h.name, Type: c.key.Type, GVK: c.key.GVK,
			Err: fmt.Errorf("abandoned, still running when the request ended: %w", ctx.Err()),
		}
	}
}

// runHooks calls every hook in order, recovering panics and checking after each hook that the
// object kept its Go type and identity. running is set to the index of the hook being called.
func (c *chain) runHooks(ctx context.Context, rn *call, obj client.Object, running *atomic.Int32) (client.Object, error) {
	goType := reflect.TypeOf(obj)
	prov := rn.reg != nil && rn.reg.marksProvenance(c)
	var marks []string
	for i, h := range c.hooks {
		running.Store(int32(i))
		id := identityOf(obj)
		var start time.Time
		if rn.observer != nil {
			start = time.Now()
		}
		var pre []byte
		if prov {
			pre, _ = json.Marshal(obj) // the hook may change obj in place
		}
		hctx, timeout := rn.hookCall(ctx, c, i)
		out, err := callHook(hctx, timeout, h.fn, obj)
		err = hookFailure(c.key.GVK, err) // before anything sees it: a Secret's hook text stays here
		if prov && err == nil && out != nil {
			if post, perr := json.Marshal(out); perr == nil && !bytes.Equal(pre, post) {
				marks = append(marks, provenanceMark(h.name, rn.reg.opts.Version, pre, post))
			}
		}
		if rn.observer != nil {
			rn.observer.ObserveHook(h.name, c.key.Type, c.key.GVK, time.Since(start), err)
		}
		if err == nil {
			err = checkSameObject(h.name, out, goType, id)
		}
		if err != nil {
			return nil, &HookError{Hook: h.name, Type: c.key.Type, GVK: c.key.GVK, Err: err}
		}
		obj = out
	}
	if len(marks) > 0 {
		setProvenance(obj, marks)
	}
	return obj, nil
}

// callHook calls fn with the hook's own deadline d (RunnerOptions.HookTimeout) and turns a panic into a
// *PanicError.
func callHook(ctx context.Context, d time.Duration, fn hooks.MutateFunc, obj client.Object) (out client.Object, err error) {
	err = guardedCall(ctx, d, func(ctx context.Context) error {
		out, err = fn(ctx, obj)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// guardedCall calls call with the hook's own deadline d (<= 0: none) and turns a panic into a
// *PanicError with its stack.
func guardedCall(ctx context.Context, d time.Duration, call func(context.Context) error) (err error) {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: fmt.Sprint(v), Stack: debug.Stack()}
		}
	}()
	return call(ctx)
}

// identity is what no hook may change.
type identity struct {
	apiVersion, kind, name, namespace string
	uid                               types.UID
}

func identityOf(obj client.Object) identity {
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	return identity{apiVersion, kind, obj.GetName(), obj.GetNamespace(), obj.GetUID()}
}

func checkSameObject(hook string, out client.Object, goType reflect.Type, before identity) error {
	if out == nil || reflect.ValueOf(out).IsNil() {
		return fmt.Errorf("%w: returned nil", ErrWrongKind)
	}
	if reflect.TypeOf(out) != goType {
		return fmt.Errorf("%w: got %T, want %s", ErrWrongKind, out, goType)
	}
	after := identityOf(out)
	for _, f := range []struct{ path, was, is string }{
		{"/apiVersion", before.apiVersion, after.apiVersion},
		{"/kind", before.kind, after.kind},
		{"/metadata/name", before.name, after.name},
		{"/metadata/namespace", before.namespace, after.namespace},
		{"/metadata/uid", string(before.uid), string(after.uid)},
	} {
		if f.was != f.is {
			return &patch.ForbiddenPathError{Hook: hook, Op: "change", Path: f.path, Field: f.path}
		}
	}
	return nil
}
