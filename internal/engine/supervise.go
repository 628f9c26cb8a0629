package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/metamap"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// stepBoundary returns an error wrapping ctx.Err() once ctx has ended: the request's work stops
// there, between two steps that cannot be interrupted (runWhole has answered already).
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

// supervise runs work (the chain's hooks in order, setting running to the one being called) in
// one concurrency slot of rn. When ctx can end, work runs on its own goroutine and is abandoned
// when ctx ends: the error names the hook still running, and the goroutine keeps the slot (and
// owns whatever work touches) until it returns. A builtin chain runs on the caller's goroutine.
func (c *chain) supervise(ctx context.Context, rn *call, work func(running *atomic.Int32) error) error {
	release, ok := rn.acquire()
	if !ok {
		return fmt.Errorf("%s: %w", c.key, failure.ErrOverloaded)
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
		return &failure.HookError{
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
		var pre []byte
		if prov {
			pre, _ = json.Marshal(obj) // the hook may change obj in place
		}
		var out client.Object
		err := rn.callOne(ctx, c, i, func(ctx context.Context) (err error) {
			out, err = h.fn(ctx, obj)
			return err
		})
		if prov && err == nil && out != nil {
			if post, perr := json.Marshal(out); perr == nil && !bytes.Equal(pre, post) {
				marks = append(marks, provenanceMark(h.name, rn.reg.opts.Version, pre, post))
			}
		}
		if err == nil {
			err = checkSameObject(h.name, out, goType, id)
		}
		if err != nil {
			return nil, &failure.HookError{Hook: h.name, Type: c.key.Type, GVK: c.key.GVK, Err: err}
		}
		obj = out
	}
	if len(marks) > 0 {
		setProvenance(obj, marks)
	}
	return obj, nil
}

// callOne calls hook i of c through fn with the hook's own context and deadline
// (call.hookCall), a panic turned into a *PanicError and a Secret's hook text withheld
// (failure.FromHook) before anything sees it, and tells the observer.
func (rn *call) callOne(ctx context.Context, c *chain, i int, fn func(context.Context) error) error {
	var start time.Time
	if rn.observer != nil {
		start = time.Now()
	}
	hctx, timeout := rn.hookCall(ctx, c, i)
	err := failure.FromHook(c.key.GVK, guardedCall(hctx, timeout, fn))
	if rn.observer != nil {
		rn.observer.ObserveHook(c.hooks[i].name, c.key.Type, c.key.GVK, time.Since(start), err)
	}
	return err
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
			err = &failure.PanicError{Value: fmt.Sprint(v), Stack: debug.Stack()}
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
		return fmt.Errorf("%w: returned nil", failure.ErrWrongKind)
	}
	if reflect.TypeOf(out) != goType {
		return fmt.Errorf("%w: got %T, want %s", failure.ErrWrongKind, out, goType)
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

// marksProvenance reports whether chain c sets undo.ProvenanceAnnotation: RegistryOptions.Provenance
// is on and c writes to the host (CreatePhysical, UpdatePhysical). Reads never mark their view,
// and writes to the virtual cluster never mark the tenant's object: vcluster copies what it
// reads to the other side, and the tenant must not see the platform's hook names there.
func (r *Registry) marksProvenance(c *chain) bool {
	_, stores := c.key.Type.ReadOf() // a Create or an Update
	return r.opts.Provenance && stores && c.key.Type.Side() == hooks.Physical
}

// provenanceMark returns "name@version#sha" for a hook that turned pre into post.
func provenanceMark(name, version string, pre, post []byte) string {
	p, _ := patch.Marshal(patch.DiffMarshaled(pre, post))
	sum := sha256.Sum256(p)
	return name + "@" + version + "#" + hex.EncodeToString(sum[:4])
}

// setProvenance puts marks into obj's undo.ProvenanceAnnotation.
func setProvenance(obj client.Object, marks []string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[undo.ProvenanceAnnotation] = strings.Join(marks, ",")
	obj.SetAnnotations(ann)
}
