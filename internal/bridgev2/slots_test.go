package bridgev2_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/engine"
)

// levelLog is a logr.LogSink that keeps every line with its level, "error" or "info".
type levelLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *levelLog) Init(logr.RuntimeInfo)                  {}
func (l *levelLog) Enabled(level int) bool                 { return level == 0 }
func (l *levelLog) WithValues(...any) logr.LogSink         { return l }
func (l *levelLog) WithName(string) logr.LogSink           { return l }
func (l *levelLog) Info(_ int, msg string, kv ...any)      { l.add("info", msg, kv) }
func (l *levelLog) Error(err error, msg string, kv ...any) { l.add("error", msg+": "+err.Error(), kv) }

func (l *levelLog) add(level, msg string, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s %s %v", level, msg, kv))
}

// find returns the lines of level, and all lines for a failure message.
func (l *levelLog) find(level string) (found []string, all string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.HasPrefix(line, level+" ") {
			found = append(found, line)
		}
	}
	return found, strings.Join(l.lines, "\n")
}

// A v2 plugin has no health endpoint: when hooks that ignore their context hold every slot
// longer than 3 × the request timeout, it logs one error naming them, and one line when a slot
// is free again, over a real go-plugin connection. The clock is a fake one.
func TestV2LogsOnceWhenHooksHoldEverySlotAndOnceWhenOneIsFree(t *testing.T) {
	// The request timeout is also the real deadline of the call left in flight until its step
	// releases it: a minute, so that the steps before (go-plugin calls on a loaded machine)
	// never outlast it. Held times come from the fake clock, in multiples of it.
	const timeout = time.Minute
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	entered := make(chan string, 2)
	releases := map[string]chan struct{}{"tenant-pod-abandoned": make(chan struct{}), "tenant-pod-in-flight": make(chan struct{})}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("ignores-context", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical},
		func(_ context.Context, o client.Object) (client.Object, error) {
			if ch, ok := releases[o.GetName()]; ok {
				entered <- o.GetName()
				<-ch // the context is ignored
			}
			return o, nil
		}))
	var log levelLog
	gaveUp := make(chan struct{}, 1) // the server has abandoned the hook of a call vcluster gave up on
	capture := func(_ hooks.HookType, _ schema.GroupVersionKind, _ []byte, _ engine.Result, err error) {
		if errors.Is(err, context.Canceled) {
			gaveUp <- struct{}{}
		}
	}
	srv, err := bridgev2.New(engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 2, Clock: clk, Capture: capture}),
		bridgev2.Options{RequestTimeout: timeout, Log: logr.New(&log)})
	if err != nil {
		t.Fatal(err)
	}
	pc := dispenseServer(t, srv, io.Discard)
	t.Cleanup(func() { // before the plugin stops: it waits for the calls in the hooks
		for _, ch := range releases {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
	mutate := func(ctx context.Context, name string) error {
		_, err := pc.Mutate(ctx, &pluginv2.Mutate_Request{
			ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical",
			Object: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","namespace":"ns"}}`,
		})
		return err
	}

	// One call that vcluster gives up on (its hook is abandoned, still holding its slot) and
	// one still waiting.
	ctx, cancel := context.WithCancel(t.Context())
	abandoned := make(chan error, 1)
	go func() { abandoned <- mutate(ctx, "tenant-pod-abandoned") }()
	<-entered
	cancel()
	if err := <-abandoned; status.Code(err) != codes.Canceled {
		t.Fatalf("the call vcluster gave up on: %v, want Canceled", err)
	}
	<-gaveUp
	inFlight := make(chan error, 1)
	go func() { inFlight <- mutate(t.Context(), "tenant-pod-in-flight") }()
	<-entered

	steps := []struct {
		name    string
		at      time.Duration // fake time since the slots were taken
		release string        // hook released first
		code    codes.Code    // of a new call
		errors  int           // error lines logged so far
		infos   int           // info lines logged so far
	}{
		{"a refused call while the slots are held within three request timeouts logs nothing", 2 * timeout, "", codes.ResourceExhausted, 0, 0},
		{"a refused call once every slot is held past three request timeouts logs one error", 3*timeout + time.Second, "", codes.ResourceExhausted, 1, 0},
		{"more refused calls log nothing more", 4 * timeout, "", codes.ResourceExhausted, 1, 0},
		{"the first call after a hook returned logs once that slots are free", 4 * timeout, "tenant-pod-in-flight", codes.OK, 1, 1},
		{"later calls log nothing more", 5 * timeout, "", codes.OK, 1, 1},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			clk.SetTime(t0.Add(st.at))
			if st.release != "" {
				close(releases[st.release])
				if err := <-inFlight; err != nil {
					t.Fatal(err)
				}
			}
			if err := mutate(t.Context(), "new"); status.Code(err) != st.code {
				t.Fatalf("a new call: %v, want %s", err, st.code)
			}
			errs, all := log.find("error")
			infos, _ := log.find("info")
			if len(errs) != st.errors || len(infos) != st.infos {
				t.Fatalf("%d error and %d info lines, want %d and %d:\n%s", len(errs), len(infos), st.errors, st.infos, all)
			}
			if len(errs) > 0 {
				for _, want := range []string{"every hook slot has been held too long", "held 2 total 2", "heldLongerThan " + (3 * timeout).String(), "ignores-context", "2025-03-01 12:00:00"} {
					if !strings.Contains(errs[0], want) {
						t.Errorf("the error line lacks %q:\n%s", want, errs[0])
					}
				}
				if strings.Contains(errs[0], "tenant-pod") {
					t.Errorf("the error line shows object data:\n%s", errs[0])
				}
			}
		})
	}
}
