package metrics_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

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
	// Other tests' recorders share the process's registry: the series of this one's hook and
	// kind, and their zeros (served from the start), are checked one by one.
	for _, c := range []struct {
		name   string
		labels string
		want   float64
	}{
		{"synchook_hook_failures_total", `hook="flaky",hook_type="CreatePhysical",reason="error"`, 5},
		{"synchook_hook_failures_total", `hook="flaky",hook_type="CreatePhysical",reason="panic"`, 5},
		{"synchook_requests_total", `gvk="v1/Pod",hook_type="CreatePhysical",result="failed",transport="admission"`, 5},
		{"synchook_requests_total", `gvk="v1/Pod",hook_type="CreatePhysical",result="refused",transport="admission"`, 5},
		{"synchook_requests_total", `gvk="v1/Pod",hook_type="CreatePhysical",result="patched",transport="admission"`, 0},
		{"synchook_requests_total", `gvk="v1/Pod",hook_type="CreatePhysical",result="failed",transport="pluginv2"`, 0},
		{"synchook_requests_total", `gvk="other",hook_type="CreatePhysical",result="unchanged",transport="grpc"`, 1},
		{"synchook_patch_operations_total", `gvk="v1/Pod",hook_type="CreatePhysical"`, 0},
		{"synchook_guard_rejections_total", `gvk="v1/Pod",hook_type="CreatePhysical"`, 0},
	} {
		if got, ok := counterValue(t, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s{%s} = %v (served: %v), want %v", c.name, c.labels, got, ok, c.want)
		}
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
	if got, ok := counterValue(t, "synchook_loops_detected_total", `hook="port"`); !ok || got != 1 {
		t.Errorf(`synchook_loops_detected_total{hook="port"} = %v (served: %v), want 1`, got, ok)
	}
}

// counterValue returns the value of the counter name's series with labels (as Prometheus'
// text format writes them, sorted by name) in the process's registry, and whether it is served.
func counterValue(t *testing.T, name, labels string) (float64, bool) {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			if strings.Join(ls, ",") == labels {
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}
