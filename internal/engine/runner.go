package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/go-logr/logr"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/undo"
)

// Observer is told about every hook call, for metrics and for noticing a hook that keeps
// failing. ObserveHook runs on the hook's goroutine right after the hook returns (also for a
// hook abandoned at its deadline, when it finally returns); err is the hook's error, a
// *PanicError, or nil (for a Secret or SecretList, a *WithheldError in place of the hook's
// error or panic). It must be safe for concurrent use and fast.
type Observer interface {
	ObserveHook(hook string, t hooks.HookType, gvk schema.GroupVersionKind, d time.Duration, err error)
}

// RunnerOptions configures a Runner. The zero value runs every chain at once, without a
// per-hook deadline and without an observer.
type RunnerOptions struct {
	// Log is the logger hooks find in their context (logr.FromContextOrDiscard(ctx), as
	// controller-runtime's log.FromContext), with the values hook, hookType and gvk of the call.
	// Default: none (hooks get logr.Discard()).
	Log logr.Logger
	// MaxConcurrent bounds how many requests run hook chains at once (n <= 0: unlimited). A
	// batched List is one request: it takes one slot for all its items. A chain abandoned at
	// its deadline keeps its slot until its hook really returns, so hooks that never return
	// cannot pile up goroutines: once every slot is held, Mutate returns ErrOverloaded at once.
	MaxConcurrent int
	// HookTimeout gives every hook call its own deadline (<= 0: none), within the request's
	// budget: a hook's context ends at whichever comes first. A hook that returns its context's
	// error fails the chain with a deadline error; a hook that ignores its context is abandoned
	// when the request's context ends.
	HookTimeout time.Duration
	// Observer is told about every hook call (metrics.Recorder). Default nil: none. When it is
	// also a LoopObserver it is told about loops (see LoopThreshold).
	Observer Observer
	// LoopThreshold is how many times in a row the same object (metadata.uid) may get the same
	// patch from an Update chain within LoopWindow before it counts as a loop: the syncer keeps
	// "fixing" what a hook changes. Default DefaultLoopThreshold (5); < 0 turns detection off.
	LoopThreshold int
	// LoopWindow is the time in which those patches must come. Default DefaultLoopWindow (5 min).
	LoopWindow time.Duration
	// Capture, when set, is called by Mutate once per request after its chain ran (a List is
	// one request), with the request's hook type, GVK and object and Mutate's result and error
	// (a failed chain too; not ErrOverloaded, where no hook ran, nor an *InputError: the
	// object's kind is in doubt, and capture redacts Secret values by kind). It runs on the
	// request's goroutine: it must be fast, must not block, and must copy raw and res.Patch if
	// it keeps them (package capture samples, copies and writes on its own goroutine).
	// Default nil.
	Capture CaptureFunc
	// Clock tells when each concurrency slot was taken, for Runner.Stuck. Default the real
	// clock (k8s.io/utils/clock); tests inject a fake one.
	Clock clock.PassiveClock
}

// CaptureFunc is the type of RunnerOptions.Capture.
type CaptureFunc func(t hooks.HookType, gvk schema.GroupVersionKind, raw []byte, res Result, err error)

// Defaults of RunnerOptions' loop detection.
const (
	DefaultLoopThreshold = 5
	DefaultLoopWindow    = 5 * time.Minute
)

// LoopObserver is told, once per object and chain, that an Update chain patched the same
// object identically more than RunnerOptions.LoopThreshold times within LoopWindow: hooks
// names the chain's hooks, uid the object, path the first JSON Pointer the patch changes.
type LoopObserver interface {
	ObserveLoop(hooks string, t hooks.HookType, gvk schema.GroupVersionKind, uid, path string)
}

// Runner executes the chains of a Registry for requests: limits, deadlines, the observer and
// the redaction of Secret values from errors. It is safe for concurrent use.
type Runner struct {
	reg         *Registry
	log         logr.Logger // GetSink() nil: no logger in the hooks' context
	loggers     sync.Map    // *chain → []logr.Logger (hookLoggers)
	stats       sync.Map    // *chain → *chainStats
	slots       *slotTable  // nil: unlimited
	hookTimeout time.Duration
	observer    Observer
	loops       *loopDetector // nil: off
	capture     CaptureFunc   // nil: off
}

// call is one request on a Runner: what holds for this request only.
type call struct {
	*Runner
	observer Observer
	// pending, when set, replaces the slots: the chains of one request (a List's items, an
	// undo read's restore and hooks) run under its one slot (hold).
	pending *heldSlot
	// validJSON: the request is known to be valid JSON (MutateOptions.ValidJSON, a List's items).
	validJSON bool
	old       []byte // MutateOptions.OldObject; nil: none
	// keepOwnUndo makes write chains treat synchook's own undo like any other value (ownUndo):
	// the idempotency check's second run runs the hooks on the first run's result.
	keepOwnUndo bool
	carry       []undo.Entry // undoPlan.carry
	// rec is the record of the object the call runs on (recordOf); own holds the request's.
	rec *intake.Record
	own intake.Record
}

func (r *Runner) newCall(validJSON bool) *call {
	return &call{Runner: r, observer: r.observer, validJSON: validJSON}
}

// NewRunner returns a Runner for reg with o. reg must have all its hooks: it must not change
// from now on.
func NewRunner(reg *Registry, o RunnerOptions) *Runner {
	r := &Runner{reg: reg, log: o.Log, hookTimeout: o.HookTimeout, observer: o.Observer, capture: o.Capture}
	if lo, ok := o.Observer.(LoopObserver); ok && o.LoopThreshold >= 0 {
		if o.LoopThreshold == 0 {
			o.LoopThreshold = DefaultLoopThreshold
		}
		if o.LoopWindow <= 0 {
			o.LoopWindow = DefaultLoopWindow
		}
		r.loops = &loopDetector{threshold: o.LoopThreshold, window: o.LoopWindow, observer: lo, seen: map[loopKey]*loopState{}}
	}
	if o.MaxConcurrent > 0 {
		if o.Clock == nil {
			o.Clock = clock.RealClock{}
		}
		r.slots = newSlotTable(o.MaxConcurrent, o.Clock)
	}
	return r
}

// Registry returns the Registry whose chains r runs.
func (r *Runner) Registry() *Registry { return r.reg }

// Mutate runs the chain of (gvk, t) on the JSON object raw for one request and returns the JSON
// Patch from raw to the hooked object (see Registry.Mutate for what it does; a list kind of a
// hooked item kind is a batch). Errors (package failure): *DecodeError for malformed input
// (with an *intake.InputError for an object of another kind or with ambiguous keys), *HookError
// naming the hook when one fails, *ItemError for a list item, ErrOverloaded when every slot is
// busy.
func (r *Runner) Mutate(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (Result, error) {
	return r.MutateWithOptions(ctx, gvk, t, raw, MutateOptions{})
}

// MutateOptions are the optional parts of one request of Runner.MutateWithOptions and
// Registry.MutateWithOptions. The zero value is a request of Mutate.
type MutateOptions struct {
	// OldObject is the JSON of the object that raw replaces in an update: the stored object,
	// as admission's UPDATE sends it in request.oldObject. nil (or empty): none, as under
	// vcluster, whose plugin protocols send none. It may be given only with an Update* hook
	// type, and only for one object (not a list kind).
	//
	// When the kind has a chain for the hook type, the engine checks it as it checks the
	// object (checkInput: valid JSON, a JSON object, its apiVersion and kind, when present,
	// those of gvk, no repeated or case-variant keys at its top level or in its metadata) and
	// hands it to the chain's hooks in their context (hooks.WithOldObject: hooks.OldObject,
	// hooks.DecodeOldObject); it decodes it never, a hook does when it reads it. It is input as
	// much as raw is: never patched, never used for the object's identity (the guard, loops,
	// undo seals and the answer read raw only), not captured (RunnerOptions.Capture). A
	// malformed one is a *DecodeError whose Old is set (errors.Is finds
	// hooks.ErrMalformedOldObject): 400 / InvalidArgument, like a malformed object. The bytes
	// are kept, not copied, until Mutate returns (and by a hook abandoned at its deadline until
	// it returns): they must not change meanwhile.
	OldObject []byte
	// ValidJSON says raw and OldObject are known to be valid JSON.
	ValidJSON bool
}

// MutateWithOptions is Mutate with the optional parts of the request in opts (an old object).
// A non-empty opts.OldObject with a hook type other than Update* is an error, before any hook
// runs.
func (r *Runner) MutateWithOptions(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte, opts MutateOptions) (Result, error) {
	c := r.newCall(opts.ValidJSON)
	if len(opts.OldObject) > 0 {
		if t.Op() != hooks.OpUpdate {
			return Result{}, fmt.Errorf("%s: an old object is given only with an Update hook type", Key{GVK: gvk, Type: t})
		}
		c.old = opts.OldObject
	}
	res, err := c.runWhole(ctx, gvk, t, raw)
	if err == nil && r.loops != nil && res.Patch != nil && t.Op() == hooks.OpUpdate {
		r.loops.observe(r.reg, gvk, t, res.rec, res.Patch)
	}
	if r.capture != nil && !errors.Is(err, failure.ErrOverloaded) && !errors.As(err, new(*intake.InputError)) {
		r.capture(t, gvk, raw, res, err)
	}
	return res, err
}

// runWhole is run for one whole request: when the kind has a chain for t, the request holds
// one concurrency slot from its decode to its answer, and an answer not ready by ctx's
// deadline is not given (the error wraps ctx.Err(): 504 / DeadlineExceeded), for a read too.
// With a deadline, the work on an object of inlineWorkBytes or more runs on a goroutine of its
// own and is answered at the deadline whatever step it is in (a step that cannot be
// interrupted keeps the slot until it ends); a smaller object's work runs on the caller's
// goroutine (its hooks bounded by the deadline either way: chain.supervise).
func (r *call) runWhole(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (Result, error) {
	key := Key{GVK: gvk, Type: t}
	release := func() {}
	if r.slots != nil && (r.reg.chains[key] != nil || r.reg.listChain(gvk, t) != nil) {
		inner, done, ok := r.hold()
		if !ok {
			return Result{}, fmt.Errorf("%s: %w", key, failure.ErrOverloaded)
		}
		r, release = inner, done
	}
	late := func() error {
		return fmt.Errorf("%s: the request's deadline passed before its answer was ready: %w", key, ctx.Err())
	}
	type answer struct {
		res Result
		err error
	}
	// give returns a, unless it is an answer that came after the deadline.
	give := func(a answer) (Result, error) {
		if a.err == nil && ctx.Err() != nil {
			return Result{}, late()
		}
		return a.res, a.err
	}
	if _, bounded := ctx.Deadline(); !bounded || len(raw) < inlineWorkBytes {
		defer release()
		res, err := r.run(ctx, gvk, t, raw)
		return give(answer{res, err})
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		func() {
			defer release() // before the answer is sent: a caller that has it may send the next request
			defer func() {
				if p := recover(); p != nil { // on this goroutine net/http's recovery would not catch it
					a = answer{err: fmt.Errorf("%s: %w", key, &failure.PanicError{Value: "the request's work panicked", Stack: debug.Stack()})}
				}
			}()
			a.res, a.err = r.run(ctx, gvk, t, raw)
		}()
		answered <- a
	}()
	select {
	case a := <-answered:
		return give(a)
	case <-ctx.Done():
	}
	// A hook running at the deadline is abandoned at once and its error names it: wait that
	// long for it, not for a step that cannot be interrupted.
	grace := time.NewTimer(deadlineGrace)
	defer grace.Stop()
	select {
	case a := <-answered:
		if a.err != nil {
			return Result{}, a.err
		}
	case <-grace.C:
	}
	return Result{}, late()
}

// inlineWorkBytes and deadlineGrace: see runWhole (the grace is how long it waits after the
// deadline for the work's own error, naming an abandoned hook).
const (
	inlineWorkBytes = 64 << 10
	deadlineGrace   = 20 * time.Millisecond
)

// acquire takes a slot of MaxConcurrent without waiting; ok is false when none is free.
func (r *call) acquire() (release func(), ok bool) {
	if r.pending != nil {
		r.pending.add()
		return r.pending.done, true
	}
	if r.slots == nil {
		return func() {}, true
	}
	return r.slots.acquire()
}

// hold takes one slot for the chain runs of one request and returns a call whose chains run
// under it, and done, which the caller defers: the slot is freed when done was called and every
// chain run on inner has returned (an abandoned hook's too). A call under a held slot is kept.
func (r *call) hold() (inner *call, done func(), ok bool) {
	if r.pending != nil {
		return r, func() {}, true
	}
	release, ok := r.acquire()
	if !ok {
		return nil, nil, false
	}
	in := *r // a call: per request, so copying it copies no Runner
	in.pending = &heldSlot{release: release}
	in.pending.add() // the caller's own reference, dropped by done
	return &in, in.pending.done, true
}

// heldSlot is one concurrency slot shared by the chain runs of one request (hold).
type heldSlot struct {
	refs    atomic.Int32
	release func()
}

func (h *heldSlot) add() { h.refs.Add(1) }

// done drops a reference; the last one frees the slot, at once.
func (h *heldSlot) done() {
	if h.refs.Add(-1) == 0 {
		h.release()
	}
}

// hookCall returns the context and the timeout (0: none) of a call of hook i of chain c: ctx
// with the hook's logger and the Runner's HookTimeout, or for a builtin hook (RegisterBuiltin,
// which neither logs nor waits) ctx itself and no timeout.
func (r *call) hookCall(ctx context.Context, c *chain, i int) (context.Context, time.Duration) {
	if c.hooks[i].builtin {
		return ctx, 0
	}
	if r.log.GetSink() == nil {
		return ctx, r.hookTimeout
	}
	return logr.NewContext(ctx, r.hookLoggers(c)[i]), r.hookTimeout
}

// hookLoggers returns the loggers of c's hooks, made on first use and kept (a WithValues costs
// more than a labels hook's whole call).
func (r *Runner) hookLoggers(c *chain) []logr.Logger {
	if v, ok := r.loggers.Load(c); ok {
		if loggers := v.([]logr.Logger); len(loggers) == len(c.hooks) {
			return loggers
		}
	}
	loggers := make([]logr.Logger, len(c.hooks))
	for i, h := range c.hooks {
		loggers[i] = r.log.WithValues("hook", h.name, "hookType", c.key.Type, "gvk", c.key.GVK.String())
	}
	r.loggers.Store(c, loggers)
	return loggers
}

// chainStats is what one chain's typed runs showed: while its hooks change only labels and
// annotations the next run copies and compares the two maps (light); once a run changed more, a
// deep copy and patch.DiffTyped, until lightAfter runs in a row changed only the maps. Only the
// cost of a run depends on it, never its result.
type chainStats struct {
	changedMore atomic.Bool
	mapsOnly    atomic.Int32 // runs in a row, since changedMore was set, that changed only the maps
}

const lightAfter = 16

func (r *Runner) statsOf(c *chain) *chainStats {
	if st, ok := r.stats.Load(c); ok {
		return st.(*chainStats)
	}
	st, _ := r.stats.LoadOrStore(c, &chainStats{})
	return st.(*chainStats)
}

// observe records what a full (not light) typed run changed.
func (st *chainStats) observe(mapsOnly bool) {
	if !mapsOnly {
		st.mapsOnly.Store(0)
		return
	}
	if st.mapsOnly.Add(1) >= lightAfter {
		st.changedMore.Store(false)
	}
}
