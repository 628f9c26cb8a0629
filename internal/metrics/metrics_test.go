package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/testenv"
)

type failing struct{ n *int }

func (failing) Name() string            { return "flaky" }
func (failing) Resource() client.Object { return &corev1.Pod{} }
func (f failing) MutateCreatePhysical(_ context.Context, o client.Object) (client.Object, error) {
	*f.n++
	if *f.n%2 == 0 {
		panic("even")
	}
	return nil, errors.New("odd")
}

func TestRecorderCountsRequestsHooksAndFailingHooks(t *testing.T) {
	var logs testenv.LogSink
	reg := engine.NewRegistry(nil)
	var n int
	reg.MustRegister(failing{&n})
	rec := metrics.New(reg, logs.Logger())
	runner := engine.NewRunner(reg, engine.RunnerOptions{Observer: rec})
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	for range metrics.FailingHookThreshold {
		done := rec.Start(metrics.TransportAdmission, hooks.CreatePhysical, gvk, time.Now())
		res, err := runner.Mutate(t.Context(), gvk, hooks.CreatePhysical, raw)
		done(res, err)
	}
	done := rec.Start(metrics.TransportGRPC, hooks.CreatePhysical, corev1.SchemeGroupVersion.WithKind("Secret"), time.Now())
	done(engine.Result{}, nil)

	if !strings.Contains(logs.String(), `"hook"="flaky"`) || !strings.Contains(logs.String(), "hook failed every time in a row") {
		t.Errorf("no failing-hook log line:\n%s", logs.String())
	}
	if err := testutil.GatherAndCompare(crmetrics.Registry, strings.NewReader(`
# HELP synchook_hook_failures_total Hook calls that returned an error or panicked.
# TYPE synchook_hook_failures_total counter
synchook_hook_failures_total{hook="flaky",hook_type="CreatePhysical",reason="error"} 5
synchook_hook_failures_total{hook="flaky",hook_type="CreatePhysical",reason="panic"} 5
# HELP synchook_requests_total Requests by transport, hook type, GVK and result.
# TYPE synchook_requests_total counter
synchook_requests_total{gvk="v1/Pod",hook_type="CreatePhysical",result="failed",transport="admission"} 5
synchook_requests_total{gvk="v1/Pod",hook_type="CreatePhysical",result="refused",transport="admission"} 5
synchook_requests_total{gvk="other",hook_type="CreatePhysical",result="unchanged",transport="grpc"} 1
`), "synchook_hook_failures_total", "synchook_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestALoopIsCountedAndLoggedOnce(t *testing.T) {
	var logs testenv.LogSink
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("port", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		o.SetLabels(map[string]string{"added": "by-hook"})
		return o, nil
	}))
	rec := metrics.New(reg, logs.Logger())
	runner := engine.NewRunner(reg, engine.RunnerOptions{Observer: rec, LoopThreshold: 3})
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"u-1"}}`) // the syncer sends it unlabelled every time
	for range 10 {
		if _, err := runner.Mutate(t.Context(), gvk, hooks.UpdatePhysical, raw); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "loop detected"); n != 1 || !strings.Contains(logs.String(), `"hook"="port"`) || !strings.Contains(logs.String(), `"path"="/metadata/labels"`) {
		t.Errorf("%d loop lines, want 1 naming the hook and path:\n%s", n, logs.String())
	}
	if err := testutil.GatherAndCompare(crmetrics.Registry, strings.NewReader(`
# HELP synchook_loops_detected_total Objects that an Update chain patched identically again and again: the syncer keeps undoing the hook.
# TYPE synchook_loops_detected_total counter
synchook_loops_detected_total{hook="port"} 1
`), "synchook_loops_detected_total"); err != nil {
		t.Error(err)
	}
}
