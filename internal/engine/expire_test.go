package engine_test

import (
	"context"
	"sync"
	"time"
)

// expiring is a request context whose deadline passes when the test says so: Err is nil until
// expire is called, and context.DeadlineExceeded from then on, as a real deadline's. A test
// that needs a hook to be running when the deadline passes expires it once the hook has
// signalled that it began, so that no load on the machine can make the deadline pass earlier
// (before the decode, or during an earlier hook) and no wall-clock budget is involved.
type expiring struct {
	context.Context // the parent, for its values
	deadline        time.Time
	done            chan struct{}
	once            sync.Once
}

// expireOnSignal returns a context of parent whose deadline passes when expire is called (more
// calls do nothing). Its Deadline reports a bounded request, a day away.
func expireOnSignal(parent context.Context) (ctx context.Context, expire func()) {
	c := &expiring{Context: parent, deadline: time.Now().Add(24 * time.Hour), done: make(chan struct{})}
	return c, func() { c.once.Do(func() { close(c.done) }) }
}

func (c *expiring) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *expiring) Done() <-chan struct{} { return c.done }

func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// expireWhenEntered calls expire, on a goroutine of its own, once entered receives a value (the
// hook under test sends one when it begins); it gives up when the test's ctx ends.
func expireWhenEntered(ctx context.Context, entered <-chan struct{}, expire func()) {
	go func() {
		select {
		case <-entered:
			expire()
		case <-ctx.Done():
		}
	}()
}
