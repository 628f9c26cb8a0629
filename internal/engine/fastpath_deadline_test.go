package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
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
			var he *engine.HookError
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
		var pe *engine.PanicError
		if !errors.As(err, &pe) || len(pe.Stack) == 0 {
			t.Errorf("error %v, want a *PanicError with its stack", err)
		}
	})
}
