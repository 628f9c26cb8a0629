package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
)

// Regressions (issue 20): the label/annotation fast path applied no per-hook deadline, never
// abandoned a MetadataFunc that blocked, and dropped the panic stack that the typed path keeps.
func TestTheFastPathAppliesTheHookDeadlineAbandonsBlockedHooksAndKeepsPanicStacks(t *testing.T) {
	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	typed := func(_ context.Context, o client.Object) (client.Object, error) { return o, nil }
	register := func(meta hooks.MetadataFunc) *engine.Registry {
		reg := engine.NewRegistry(nil)
		reg.MustRegister(hooks.NewMetadataFunc("meta", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, typed, meta))
		return reg
	}

	t.Run("a MetadataFunc gets the per-hook deadline, earlier than the request's", func(t *testing.T) {
		var hookDeadline time.Time
		reg := register(func(ctx context.Context, _ *hooks.Metadata) error {
			hookDeadline, _ = ctx.Deadline()
			return nil
		})
		r := engine.NewRunner(reg, engine.RunnerOptions{HookTimeout: time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		requestDeadline, _ := ctx.Deadline()
		if _, err := r.Mutate(ctx, gvk, hooks.CreatePhysical, pod); err != nil {
			t.Fatal(err)
		}
		if hookDeadline.IsZero() || !hookDeadline.Before(requestDeadline) {
			t.Errorf("the hook's deadline is %v, want the 1 s per-hook deadline before the request's %v", hookDeadline, requestDeadline)
		}
	})

	t.Run("a MetadataFunc that blocks is abandoned when the request ends, naming the hook", func(t *testing.T) {
		started, unblock := make(chan struct{}), make(chan struct{})
		defer close(unblock)
		reg := register(func(context.Context, *hooks.Metadata) error {
			close(started)
			<-unblock // ignores its context
			return nil
		})
		r := engine.NewRunner(reg, engine.RunnerOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := r.Mutate(ctx, gvk, hooks.CreatePhysical, pod)
			done <- err
		}()
		<-started
		cancel()
		select {
		case err := <-done:
			var he *failure.HookError
			if !errors.As(err, &he) || he.Hook != "meta" || !strings.Contains(err.Error(), "abandoned") {
				t.Errorf("error %v, want the hook abandoned, named", err)
			}
		case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
			t.Fatal("the request did not end: the blocked hook was waited for")
		}
	})

	t.Run("a MetadataFunc's panic keeps its stack for the log", func(t *testing.T) {
		reg := register(func(context.Context, *hooks.Metadata) error { panic("boom") })
		_, err := reg.Mutate(t.Context(), gvk, hooks.CreatePhysical, pod)
		var pe *failure.PanicError
		if !errors.As(err, &pe) || len(pe.Stack) == 0 {
			t.Errorf("error %v, want a *PanicError with its stack", err)
		}
	})
}

// Builtin hooks (issue 27) run on the request's goroutine, without a goroutine the request
// could abandon; the deadline still holds for them: an answer not ready by it is not given.
func TestABuiltinChainRunsOnTheRequestsGoroutineAndItsDeadlineHolds(t *testing.T) {
	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	typed := func(_ context.Context, o client.Object) (client.Object, error) { return o, nil }
	register := func(reg *engine.Registry, name string, builtin bool, meta hooks.MetadataFunc) {
		t.Helper()
		h := hooks.NewMetadataFunc(name, &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, typed, meta)
		register := reg.Register
		if builtin {
			register = func(h hooks.ClientHook) error { return reg.RegisterBuiltin(h, "1") }
		}
		if err := register(h); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("a chain of builtin hooks runs on the goroutine that called Mutate", func(t *testing.T) {
		reg := engine.NewRegistry(nil)
		var stack []byte
		register(reg, "builtin", true, func(context.Context, *hooks.Metadata) error {
			stack = make([]byte, 64<<10)
			stack = stack[:runtime.Stack(stack, false)]
			return nil
		})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a context that can end
		defer cancel()
		if _, err := engine.NewRunner(reg, engine.RunnerOptions{}).Mutate(ctx, gvk, hooks.CreatePhysical, pod); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(stack, []byte("engine.(*Runner).Mutate(")) { // the caller's frame
			t.Errorf("the hook ran on a goroutine of its own:\n%s", stack)
		}
	})

	t.Run("a deadline passed while a builtin hook ran gives no answer", func(t *testing.T) {
		reg := engine.NewRegistry(nil)
		entered := make(chan struct{}, 1)
		register(reg, "slow-builtin", true, func(ctx context.Context, m *hooks.Metadata) error {
			entered <- struct{}{}
			<-ctx.Done() // returns when the request's time is up, and sets a label after it
			m.Labels = map[string]string{"late": "yes"}
			return nil
		})
		// The deadline passes while the builtin hook runs, never before it starts (a fixed
		// 10 ms could pass during the decode on a loaded machine, and test another path).
		ctx, expire := expireOnSignal(t.Context())
		expireWhenEntered(t.Context(), entered, expire)
		res, err := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 1}).Mutate(ctx, gvk, hooks.CreatePhysical, pod)
		if !errors.Is(err, context.DeadlineExceeded) || res.Patch != nil {
			t.Errorf("result %s, error %v: want no answer and a deadline error", res.Patch, err)
		}
	})

	t.Run("one hook that is not builtin makes the chain run on a goroutine it can abandon", func(t *testing.T) {
		reg := engine.NewRegistry(nil)
		register(reg, "builtin", true, func(context.Context, *hooks.Metadata) error { return nil })
		started, unblock := make(chan struct{}), make(chan struct{})
		defer close(unblock)
		register(reg, "user", false, func(context.Context, *hooks.Metadata) error {
			close(started)
			<-unblock // ignores its context
			return nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := engine.NewRunner(reg, engine.RunnerOptions{}).Mutate(ctx, gvk, hooks.CreatePhysical, pod)
			done <- err
		}()
		<-started
		cancel()
		select {
		case err := <-done:
			if !strings.Contains(fmt.Sprint(err), "abandoned") {
				t.Errorf("error %v, want the user hook abandoned", err)
			}
		case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
			t.Fatal("the request did not end: the blocked hook was waited for")
		}
	})
}
