package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/metrics"
)

// levelSink is a logr.LogSink that keeps every line with its level: "error" or "info".
type levelSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *levelSink) Init(logr.RuntimeInfo)                  {}
func (s *levelSink) Enabled(int) bool                       { return true }
func (s *levelSink) WithValues(...any) logr.LogSink         { return s }
func (s *levelSink) WithName(string) logr.LogSink           { return s }
func (s *levelSink) Info(_ int, msg string, kv ...any)      { s.add("info", msg, kv) }
func (s *levelSink) Error(err error, msg string, kv ...any) { s.add("error", msg+": "+err.Error(), kv) }

func (s *levelSink) add(level, msg string, kv []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, fmt.Sprintf("%s %s %v", level, msg, kv))
}

func (s *levelSink) count(level string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.HasPrefix(l, level+" ") {
			n++
		}
	}
	return n
}

func (s *levelSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// stuckGauge reads synchook_slots_stuck from controller-runtime's registry.
func stuckGauge(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "synchook_slots_stuck" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("synchook_slots_stuck is not registered")
	return 0
}

func TestStuckSlotsAreAGaugeAndOneErrorLinePerChange(t *testing.T) {
	const timeout = 10 * time.Second
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	entered := make(chan struct{}, 2)
	releases := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	t.Cleanup(func() {
		for _, ch := range releases {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("ignores-context", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical},
		func(_ context.Context, o client.Object) (client.Object, error) {
			entered <- struct{}{}
			<-releases[o.GetName()]
			return o, nil
		}))
	runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 2, Clock: clk})
	stop := metrics.WatchSlots(runner, timeout)
	defer stop()
	var sink levelSink
	check := metrics.NewSlotCheck(runner, metrics.DefaultStuckSlotsFactor*timeout, logr.New(&sink))

	answered := map[string]chan error{}
	for _, name := range []string{"a", "b"} {
		answered[name] = make(chan error, 1)
		go func() {
			_, err := runner.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Pod"), hooks.CreatePhysical,
				[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"`+name+`"}}`))
			answered[name] <- err
		}()
		<-entered
	}

	steps := []struct {
		name      string
		at        time.Duration // fake time since the slots were taken
		release   string        // hook released before the check
		gauge     float64
		stuck     bool
		errorLogs int
		infoLogs  int
	}{
		{"slots held within the request timeout are neither counted nor failing", 0, "", 0, false, 0, 0},
		{"slots held past the request timeout are counted", timeout + time.Second, "", 2, false, 0, 0},
		{"every slot held past three request timeouts fails the check with one error line", 3*timeout + time.Second, "", 2, true, 1, 0},
		{"checking again while still stuck logs nothing more", 4 * timeout, "", 2, true, 1, 0},
		{"a hook that returns frees its slot: the check passes and says so once", 4 * timeout, "a", 1, false, 1, 1},
		{"checking again after the recovery logs nothing more", 5 * timeout, "", 1, false, 1, 1},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.SetTime(t0.Add(s.at))
			if s.release != "" {
				close(releases[s.release])
				if err := <-answered[s.release]; err != nil {
					t.Fatal(err)
				}
			}
			if got := stuckGauge(t); got != s.gauge {
				t.Errorf("synchook_slots_stuck = %v, want %v", got, s.gauge)
			}
			err := check.Check()
			if (err != nil) != s.stuck || check.Stuck() != s.stuck {
				t.Fatalf("Check() = %v, Stuck() = %v, want stuck %v", err, check.Stuck(), s.stuck)
			}
			if err != nil && (!errors.Is(err, metrics.ErrSlotsStuck) || !strings.Contains(err.Error(), "2 of 2 hook slots held longer than 30s") ||
				!strings.Contains(err.Error(), "since 2025-03-01T12:00:00Z")) {
				t.Errorf("Check() = %q, want how many slots are held and since when", err)
			}
			if sink.count("error") != s.errorLogs || sink.count("info") != s.infoLogs {
				t.Errorf("log has %d error and %d info lines, want %d and %d:\n%s", sink.count("error"), sink.count("info"), s.errorLogs, s.infoLogs, sink.String())
			}
		})
	}
	stop()
	if got := stuckGauge(t); got != 0 {
		t.Errorf("synchook_slots_stuck after stop = %v, want 0", got)
	}
}
