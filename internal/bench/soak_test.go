package bench_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/synchook/synchook/internal/bench"
)

// TestSoakShort is the soak at a size CI affords: every answer checked, zero corrupted, and no
// goroutine growth between the first and the last 10% of the requests. `synchook soak` runs the
// full 100,000. It checks answers and leaks, not latency: a request gets 5 minutes, since make
// test runs it with the race detector beside other packages on a 2-core machine, where 64
// callers saw a p99 of 7.6 s and some requests past serve's 10 s (two make test at once).
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of load")
	}
	var out bytes.Buffer
	rep, err := bench.Soak(t.Context(), bench.SoakOptions{Mutations: 6000, Concurrency: 64, Out: &out, RequestTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if rep.Corrupted != 0 || rep.Unexpected != 0 {
		t.Errorf("corrupted %d, unexpected %d; first problem: %s", rep.Corrupted, rep.Unexpected, rep.FirstProblem)
	}
	if rep.OK+rep.HookErrors+rep.Panics != rep.Mutations || rep.HookErrors != 60 || rep.Panics != 6 {
		t.Errorf("ok %d + hook errors %d + panics %d != %d", rep.OK, rep.HookErrors, rep.Panics, rep.Mutations)
	}
	if rep.GoroutinesLast > rep.GoroutinesFirst+rep.GoroutinesFirst/2 {
		t.Errorf("goroutines grew from %d to %d", rep.GoroutinesFirst, rep.GoroutinesLast)
	}
}
