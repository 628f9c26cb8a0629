package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
)

// blockingHooks make hooks that ignore their context: each call announces the object's name on
// entered and returns only when the test releases that name.
type blockingHooks struct {
	entered  chan string
	releases map[string]chan struct{}
}

func newBlockingHooks(t *testing.T, names ...string) *blockingHooks {
	b := &blockingHooks{entered: make(chan string, len(names)), releases: map[string]chan struct{}{}}
	for _, n := range names {
		b.releases[n] = make(chan struct{})
	}
	t.Cleanup(func() { // never leave a hook goroutine behind
		for _, ch := range b.releases {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
	return b
}

func (b *blockingHooks) fn(_ context.Context, o client.Object) (client.Object, error) {
	b.entered <- o.GetName()
	<-b.releases[o.GetName()] // the context is ignored
	return o, nil
}

func (b *blockingHooks) release(name string) { close(b.releases[name]) }

func podNamed(name string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","namespace":"ns"}}`)
}

// startAbandoned runs a request for pod name whose context the test ends once the hook is in:
// the request returns at once with the hook abandoned, still holding its slot.
func startAbandoned(t *testing.T, runner *engine.Runner, raw any, b *blockingHooks, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		var err error
		switch raw := raw.(type) {
		case []byte:
			_, err = runner.Mutate(ctx, podGVK, hooks.CreatePhysical, raw)
		case string: // a PodList for GetPhysical
			_, err = runner.Mutate(ctx, podListGVK, hooks.GetPhysical, []byte(raw))
		}
		done <- err
	}()
	if got := <-b.entered; got != name {
		t.Fatalf("hook entered for %q, want %q", got, name)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned request for %s: %v, want context.Canceled", name, err)
	}
}

func TestStuckSlotsAreCountedNamedAndFreedWhenTheHookReturns(t *testing.T) {
	const timeout = 10 * time.Second
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		run  func(t *testing.T, clk *clocktesting.FakePassiveClock)
	}{
		{"a hook that ignores its context and holds every slot makes all of them stuck, named, until one returns", func(t *testing.T, clk *clocktesting.FakePassiveClock) {
			b := newBlockingHooks(t, "abandoned", "in-flight", "third")
			reg := engine.NewRegistry(nil)
			reg.MustRegister(podHook("ignores-context", b.fn))
			runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 2, Clock: clk})

			startAbandoned(t, runner, podNamed("abandoned"), b, "abandoned")
			inFlight := make(chan error, 1)
			go func() {
				_, err := runner.Mutate(t.Context(), podGVK, hooks.CreatePhysical, podNamed("in-flight"))
				inFlight <- err
			}()
			<-b.entered

			if s := runner.Stuck(timeout); s.Held != 0 || s.Total != 2 || s.All() || len(s.Hooks) != 0 {
				t.Fatalf("right after the requests: %+v, want 0 of 2 held", s)
			}
			clk.SetTime(t0.Add(timeout + time.Second))
			s := runner.Stuck(timeout)
			if s.Held != 2 || !s.All() || !s.Since.Equal(t0) {
				t.Fatalf("past the deadline: %+v, want 2 of 2 held since %s", s, t0)
			}
			if !slices.Equal(s.Hooks, []string{"ignores-context"}) {
				t.Errorf("hooks = %q, want the abandoned hook named once", s.Hooks)
			}
			if str := s.String(); !strings.Contains(str, "2 of 2 hook slots held longer than 10s") || !strings.Contains(str, "2025-03-01T12:00:00Z") || !strings.Contains(str, "ignores-context") {
				t.Errorf("String() = %q, want the count, the threshold, since when and the hook", str)
			}
			if _, err := runner.Mutate(t.Context(), podGVK, hooks.CreatePhysical, podNamed("third")); !errors.Is(err, failure.ErrOverloaded) {
				t.Fatalf("a request while every slot is stuck: %v, want ErrOverloaded", err)
			}

			b.release("in-flight")
			if err := <-inFlight; err != nil { // the slot is freed before the answer
				t.Fatal(err)
			}
			if s := runner.Stuck(timeout); s.Held != 1 || s.All() {
				t.Errorf("after one hook returned: %+v, want 1 of 2 held", s)
			}
		}},
		{"a List holds one slot for all its items and its abandoned item's hook is named", func(t *testing.T, clk *clocktesting.FakePassiveClock) {
			b := newBlockingHooks(t, "item")
			reg := listRegistry(t, hooks.NewFunc("list-item-hook", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, b.fn))
			runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 1, Clock: clk})
			startAbandoned(t, runner, `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"item"}}]}`, b, "item")
			clk.SetTime(t0.Add(3*timeout + time.Second))
			s := runner.Stuck(3 * timeout)
			if s.Held != 1 || s.Total != 1 || !s.All() || !slices.Equal(s.Hooks, []string{"list-item-hook"}) {
				t.Errorf("stuck List: %+v, want its one slot held by list-item-hook", s)
			}
		}},
		{"a label/annotation hook that ignores its context is abandoned and named too", func(t *testing.T, clk *clocktesting.FakePassiveClock) {
			b := newBlockingHooks(t, "meta")
			reg := engine.NewRegistry(nil)
			reg.MustRegister(hooks.NewMetadataFunc("meta-ignores-context", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, b.fn,
				func(context.Context, *hooks.Metadata) error {
					b.entered <- "meta"
					<-b.releases["meta"] // the context is ignored
					return nil
				}))
			runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 1, Clock: clk})
			startAbandoned(t, runner, podNamed("meta"), b, "meta")
			clk.SetTime(t0.Add(timeout + time.Second))
			if s := runner.Stuck(timeout); !s.All() || !slices.Equal(s.Hooks, []string{"meta-ignores-context"}) {
				t.Errorf("stuck metadata hook: %+v, want its one slot held by meta-ignores-context", s)
			}
		}},
		{"slots held for less than the threshold are not stuck", func(t *testing.T, clk *clocktesting.FakePassiveClock) {
			b := newBlockingHooks(t, "slow")
			reg := engine.NewRegistry(nil)
			reg.MustRegister(podHook("slow", b.fn))
			runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 1, Clock: clk})
			startAbandoned(t, runner, podNamed("slow"), b, "slow")
			clk.SetTime(t0.Add(timeout))
			if s := runner.Stuck(timeout); s.Held != 0 || s.All() || !s.Since.IsZero() || s.Hooks != nil {
				t.Errorf("held exactly the threshold: %+v, want nothing stuck", s)
			}
		}},
		{"a Runner without a limit has no slots to hold", func(t *testing.T, clk *clocktesting.FakePassiveClock) {
			runner := engine.NewRunner(engine.NewRegistry(nil), engine.RunnerOptions{Clock: clk})
			if s := runner.Stuck(0); s.Total != 0 || s.All() {
				t.Errorf("unlimited Runner: %+v", s)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, clocktesting.NewFakePassiveClock(t0))
		})
	}
}

// The table costs one clock read per request: a slot held by no one is never reported, however
// many requests came and went.
func TestSlotsFreedByReturningHooksAreNeverStuck(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	reg := engine.NewRegistry(nil)
	reg.MustRegister(podHook("quick", func(_ context.Context, o client.Object) (client.Object, error) { return o, nil }))
	runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 3, Clock: clk})
	for i := range 10 {
		if _, err := runner.Mutate(t.Context(), podGVK, hooks.CreatePhysical, podNamed(fmt.Sprint("p", i))); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(clk.Now().Add(time.Hour))
	if s := runner.Stuck(time.Second); s.Held != 0 {
		t.Errorf("after requests that all returned: %+v, want none held", s)
	}
}
