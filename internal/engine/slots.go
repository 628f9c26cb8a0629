package engine

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// slotTable is the concurrency limit of a Runner (RunnerOptions.MaxConcurrent) that also
// knows since when each slot is held (Runner.Stuck).
type slotTable struct {
	clock clock.PassiveClock
	free  chan int32     // indices of the free slots
	since []atomic.Int64 // Unix nanoseconds at which slot i was taken; 0 while it is free

	mu        sync.Mutex
	abandoned map[*hookRun]*chain // hook runs whose request ended before they returned
}

func newSlotTable(n int, clk clock.PassiveClock) *slotTable {
	t := &slotTable{clock: clk, free: make(chan int32, n), since: make([]atomic.Int64, n), abandoned: map[*hookRun]*chain{}}
	for i := range n {
		t.free <- int32(i)
	}
	return t
}

// acquire takes a free slot without waiting; ok is false when none is free. release must be
// called exactly once.
func (t *slotTable) acquire() (release func(), ok bool) {
	select {
	case i := <-t.free:
		t.since[i].Store(t.clock.Now().UnixNano())
		return func() {
			t.since[i].Store(0)
			t.free <- i
		}, true
	default:
		return nil, false
	}
}

// hookRun is what chain.supervise shares with the goroutine that calls the chain's hooks: the
// hook being called and, once abandoned, the table that lists it until the hooks return (end).
type hookRun struct {
	running atomic.Int32 // index of the hook being called

	mu    sync.Mutex
	ended bool       // the hooks have returned
	table *slotTable // set while the run is abandoned and listed in table.abandoned
}

// abandon lists the run in t as abandoned by its request, unless its hooks have already
// returned. t may be nil (no concurrency limit: nothing to report).
func (h *hookRun) abandon(t *slotTable, c *chain) {
	if t == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.table = t
	t.mu.Lock()
	t.abandoned[h] = c
	t.mu.Unlock()
}

// end records that the hooks have returned and takes the run off its table's abandoned list.
func (h *hookRun) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = true
	if h.table != nil {
		h.table.mu.Lock()
		delete(h.table.abandoned, h)
		h.table.mu.Unlock()
		h.table = nil
	}
}

// abandonedHooks returns the names of the hooks abandoned runs are calling, each once, sorted.
func (t *slotTable) abandonedHooks() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for run, c := range t.abandoned {
		if i := int(run.running.Load()); i >= 0 && i < len(c.hooks) && !slices.Contains(names, c.hooks[i].name) {
			names = append(names, c.hooks[i].name)
		}
	}
	slices.Sort(names)
	return names
}

// StuckSlots is what Runner.Stuck reports: how many of the Runner's concurrency slots have
// been held longer than a threshold, since when, and which hooks hold them. It carries no
// object data.
type StuckSlots struct {
	// Held is the number of slots held longer than Threshold.
	Held int
	// Total is the number of slots (RunnerOptions.MaxConcurrent); 0 for a Runner without a
	// limit, which has no slots to hold.
	Total int
	// Threshold is the threshold asked for.
	Threshold time.Duration
	// Since is when the oldest of the Held slots was taken; zero when Held is 0.
	Since time.Time
	// Hooks names, each once and sorted, the hooks that were still running when their request
	// ended and have not returned yet (hooks that ignore their context): what holds slots past
	// the requests' deadlines. Empty when Held is 0. A slot held past the threshold by a chain
	// whose request has not ended yet (one without a deadline) is counted but not named.
	Hooks []string
}

// All reports whether every slot has been held longer than the threshold: then no request
// can run a chain until one of the holding hooks returns, and each one gets ErrOverloaded.
func (s StuckSlots) All() bool { return s.Total > 0 && s.Held >= s.Total }

// String describes s in one line for logs and health checks, e.g. "4 of 4 hook slots held
// longer than 30s, the oldest since 2025-01-02T03:04:05Z, by hooks still running after their
// request ended: slow-hook".
func (s StuckSlots) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d hook slots held longer than %s", s.Held, s.Total, s.Threshold)
	if s.Held > 0 {
		fmt.Fprintf(&b, ", the oldest since %s", s.Since.UTC().Format(time.RFC3339))
	}
	if len(s.Hooks) > 0 {
		fmt.Fprintf(&b, ", by hooks still running after their request ended: %s", strings.Join(s.Hooks, ", "))
	}
	return b.String()
}

// Stuck reports the slots of r (RunnerOptions.MaxConcurrent) held longer than threshold,
// measured on RunnerOptions.Clock. A slot is held from the moment a request takes it until the
// last hook it runs returns, also after the request has ended (an abandoned hook keeps it), so
// a slot held longer than the longest request timeout is held by a hook that ignores its
// context. A batched List holds one slot for all its items. Stuck reads every slot once and
// takes no slot: it is safe for concurrent use and meant for health checks and metrics, not
// for every request. A Runner without a limit reports Total 0.
func (r *Runner) Stuck(threshold time.Duration) StuckSlots {
	t := r.slots
	s := StuckSlots{Threshold: threshold}
	if t == nil {
		return s
	}
	s.Total = len(t.since)
	limit := t.clock.Now().Add(-threshold).UnixNano() // held longer than threshold: taken before limit
	var oldest int64
	for i := range t.since {
		if v := t.since[i].Load(); v != 0 && v < limit {
			s.Held++
			if oldest == 0 || v < oldest {
				oldest = v
			}
		}
	}
	if s.Held > 0 {
		s.Since = time.Unix(0, oldest)
		s.Hooks = t.abandonedHooks()
	}
	return s
}
