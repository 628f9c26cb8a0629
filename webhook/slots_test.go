package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/webhook"
)

// podReviewNamed is podReview for a pod of another name.
func podReviewNamed(name string) string {
	return strings.ReplaceAll(podReview, `"name":"p"`, `"name":"`+name+`"`)
}

func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func slotsStuckGauge(t *testing.T) float64 {
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

// Hooks that ignore their context and hold every slot make /readyz and /healthz fail on both
// listeners once every slot has been held longer than 3 × the request timeout, with the stuck
// count in synchook_slots_stuck; both pass again when one hook returns. The clock is a fake
// one: the requests stay in their hooks until the test releases them.
func TestHooksThatHoldEverySlotFailTheProbesUntilOneReturns(t *testing.T) {
	const timeout = 10 * time.Second
	const pod = "tenant-pod-4711" // object data that no probe may show
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	entered := make(chan string, 2)
	releases := map[string]chan struct{}{pod + "-a": make(chan struct{}), pod + "-b": make(chan struct{})}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(testHook("ignores-context", func(_ context.Context, o client.Object) (client.Object, error) {
		entered <- o.GetName()
		<-releases[o.GetName()]
		return o, nil
	}))
	runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 2, Clock: clk})
	s, err := webhook.NewServer(runner, webhook.Options{RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	admission := httptest.NewTLSServer(s.Handler()) // the HTTPS listener's handler
	t.Cleanup(admission.Close)
	probes := httptest.NewServer(s.ProbeHandler()) // the plain-HTTP probe listener's
	t.Cleanup(probes.Close)
	t.Cleanup(func() { // before the servers close: they wait for the requests in the hooks
		for _, ch := range releases {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
	defer metrics.WatchSlots(runner, timeout)() // what Start does when Options.Metrics is set

	answered := map[string]chan int{}
	for name := range releases {
		answered[name] = make(chan int, 1)
		go func() {
			resp, err := admission.Client().Post(admission.URL+"/mutate/CreatePhysical", "application/json", strings.NewReader(podReviewNamed(name)))
			if err != nil {
				answered[name] <- 0
				return
			}
			resp.Body.Close()
			answered[name] <- resp.StatusCode
		}()
	}
	<-entered
	<-entered

	listeners := []struct {
		name string
		url  string
		hc   *http.Client
	}{
		{"HTTPS listener", admission.URL, admission.Client()},
		{"probe listener", probes.URL, probes.Client()},
	}
	steps := []struct {
		name    string
		at      time.Duration // fake time since the slots were taken
		release string        // hook released first
		status  int           // of /readyz and /healthz
		gauge   float64
	}{
		{"slots held within the request timeout keep the pod ready", timeout / 2, "", http.StatusOK, 0},
		{"slots held past the request timeout are counted but the pod stays ready", timeout + time.Second, "", http.StatusOK, 2},
		{"every slot held past three request timeouts makes the probes fail", 3*timeout + time.Second, "", http.StatusInternalServerError, 2},
		{"one hook returning makes the probes pass again", 4 * timeout, pod + "-a", http.StatusOK, 1},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			clk.SetTime(t0.Add(st.at))
			if st.release != "" {
				close(releases[st.release])
				if code := <-answered[st.release]; code != http.StatusOK {
					t.Fatalf("the released request answered %d", code)
				}
			}
			if got := slotsStuckGauge(t); got != st.gauge {
				t.Errorf("synchook_slots_stuck = %v, want %v", got, st.gauge)
			}
			for _, l := range listeners {
				for _, path := range []string{"/readyz", "/healthz"} {
					if code, body := get(t, l.hc, l.url+path); code != st.status {
						t.Errorf("%s %s = %d, want %d:\n%s", l.name, path, code, st.status, body)
					} else if code != http.StatusOK && !strings.Contains(body, "[-]hook-slots failed") {
						t.Errorf("%s %s does not name the failing check:\n%s", l.name, path, body)
					}
				}
				code, body := get(t, l.hc, l.url+"/readyz/hook-slots")
				if code != st.status {
					t.Errorf("%s /readyz/hook-slots = %d, want %d: %s", l.name, code, st.status, body)
				}
				if code != http.StatusOK && (!strings.Contains(body, "2 of 2 hook slots held longer than 30s") || !strings.Contains(body, "since 2025-03-01T12:00:00Z")) {
					t.Errorf("%s /readyz/hook-slots = %q, want how many slots are held and since when", l.name, body)
				}
				if strings.Contains(body, pod) {
					t.Errorf("%s /readyz/hook-slots shows object data: %q", l.name, body)
				}
			}
			if st.status != http.StatusOK { // what the stuck hooks do to every other write
				resp, err := admission.Client().Post(admission.URL+"/mutate/CreatePhysical", "application/json", strings.NewReader(podReviewNamed("third")))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusTooManyRequests {
					t.Errorf("a write while every slot is stuck = %d, want 429", resp.StatusCode)
				}
			}
		})
	}
}
