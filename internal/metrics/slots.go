package metrics

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/internal/engine"
)

// DefaultStuckSlotsFactor is the default N of the stuck-slots check (webhook.Options and
// bridgev2.Options StuckSlotsFactor): a process is unhealthy when every hook slot has been held
// longer than N × the request timeout.
const DefaultStuckSlotsFactor = 3

// stuckSlots is synchook_slots_stuck: at every scrape, the watched Runners' slots held longer
// than their request timeout.
var stuckSlots = &slotCollector{
	desc: prometheus.NewDesc("synchook_slots_stuck",
		"Hook concurrency slots held longer than the request timeout: by hooks that ignore their context.", nil, nil),
	watched: map[*slotWatch]struct{}{},
}

func init() { crmetrics.Registry.MustRegister(stuckSlots) }

type slotWatch struct {
	runner   *engine.Runner
	deadline time.Duration
}

// slotCollector is a prometheus.Collector that reads the watched Runners when scraped, so the
// gauge costs nothing on the request path.
type slotCollector struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	watched map[*slotWatch]struct{}
}

func (c *slotCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *slotCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	deadlines := map[*engine.Runner]time.Duration{} // a Runner watched twice counts once, at its shortest deadline
	for w := range c.watched {
		if d, ok := deadlines[w.runner]; !ok || w.deadline < d {
			deadlines[w.runner] = w.deadline
		}
	}
	c.mu.Unlock()
	held := 0
	for r, d := range deadlines {
		held += r.Stuck(d).Held
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(held))
}

// WatchSlots makes the gauge synchook_slots_stuck count the slots of r (engine.Runner.Stuck)
// held longer than deadline, the longest a request may take (its request timeout), until
// stop is called: a slot held longer is held by a hook that was abandoned when its request
// ended and has not returned. The gauge is the sum over the Runners watched.
func WatchSlots(r *engine.Runner, deadline time.Duration) (stop func()) {
	w := &slotWatch{runner: r, deadline: deadline}
	stuckSlots.mu.Lock()
	stuckSlots.watched[w] = struct{}{}
	stuckSlots.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			stuckSlots.mu.Lock()
			delete(stuckSlots.watched, w)
			stuckSlots.mu.Unlock()
		})
	}
}

// SlotCheck tells whether every concurrency slot of a Runner has been held longer than a limit
// (N × the request timeout): then hooks that ignore their context hold them all, every request
// is refused as overloaded, and only a restart (or those hooks returning) helps. It logs the
// change at error level when it starts, naming the hooks, and at info level when a slot is
// free again: once per change, however often it is checked. It is safe for concurrent use.
type SlotCheck struct {
	runner *engine.Runner
	limit  time.Duration
	log    logr.Logger

	mu    sync.Mutex  // serializes Check's comparison and log
	stuck atomic.Bool // what the last Check found
}

// NewSlotCheck returns a SlotCheck of r's slots against limit that logs to log.
func NewSlotCheck(r *engine.Runner, limit time.Duration, log logr.Logger) *SlotCheck {
	return &SlotCheck{runner: r, limit: limit, log: log}
}

// ErrSlotsStuck is wrapped by Check's error.
var ErrSlotsStuck = errors.New("every hook slot is held by a hook that ignores its context")

// Check reads the Runner's slots and returns nil unless every one has been held longer than
// the limit; then it returns an error wrapping ErrSlotsStuck that says how many are held, since
// when and by which hooks (names only, no object data). A Runner without a concurrency limit
// is never stuck.
func (c *SlotCheck) Check() error {
	s := c.runner.Stuck(c.limit)
	stuck := s.All()
	c.mu.Lock()
	if was := c.stuck.Swap(stuck); was != stuck {
		if stuck {
			c.log.Error(ErrSlotsStuck, "every hook slot has been held too long: each request is refused as overloaded (429 / ResourceExhausted) until one of these hooks returns or synchook restarts",
				"held", s.Held, "total", s.Total, "heldLongerThan", c.limit.String(), "since", s.Since.UTC(), "hooks", s.Hooks)
		} else {
			c.log.Info("hook slots free again: requests run", "stuckSlots", s.Held, "total", s.Total, "heldLongerThan", c.limit.String())
		}
	}
	c.mu.Unlock()
	if !stuck {
		return nil
	}
	return &stuckError{s}
}

// Stuck reports whether the last Check found every slot stuck; it costs one atomic load.
func (c *SlotCheck) Stuck() bool { return c.stuck.Load() }

type stuckError struct{ s engine.StuckSlots }

func (e *stuckError) Error() string { return ErrSlotsStuck.Error() + ": " + e.s.String() }
func (e *stuckError) Unwrap() error { return ErrSlotsStuck }
