// Package parallel runs independent pieces of one request, such as the items of a List, on
// all CPUs.
package parallel

import (
	"runtime"

	"golang.org/x/sync/errgroup"
)

// For calls fn(i) for every i in [0, n), on up to GOMAXPROCS goroutines at once, and waits for
// all of them. It returns the error of the lowest i that failed, whichever failed first, so
// the outcome does not depend on scheduling; every fn runs even when an earlier one failed.
// With n < 2 or GOMAXPROCS = 1, fn runs on the calling goroutine in order.
func For(n int, fn func(i int) error) error {
	errs := make([]error, n)
	if workers := runtime.GOMAXPROCS(0); workers > 1 && n > 1 {
		var g errgroup.Group
		g.SetLimit(workers)
		for i := range n {
			g.Go(func() error { errs[i] = fn(i); return nil })
		}
		_ = g.Wait()
	} else {
		for i := range n {
			errs[i] = fn(i)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
