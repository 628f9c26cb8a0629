// Package parallel runs independent pieces of one request, such as the items of a List, on
// all CPUs.
package parallel

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"golang.org/x/sync/errgroup"
)

// For calls fn(i) for every i in [0, n), on up to GOMAXPROCS goroutines at once, and waits for
// all of them. It returns the error of the lowest i that failed, whichever failed first, so
// the outcome does not depend on scheduling; every fn runs even when an earlier one failed.
// With n < 2 or GOMAXPROCS = 1, fn runs on the calling goroutine in order.
//
// A panic in fn does not crash the process from a worker goroutine: once all calls are done,
// the panic of the lowest i is raised again on the calling goroutine (with the worker's stack
// in its value), where it would have happened without the workers — so net/http's recovery
// of a handler still applies.
func For(n int, fn func(i int) error) error {
	errs := make([]error, n)
	if workers := runtime.GOMAXPROCS(0); workers > 1 && n > 1 {
		panics := make([]any, n)
		var g errgroup.Group
		g.SetLimit(workers)
		for i := range n {
			g.Go(func() error {
				defer func() {
					if v := recover(); v != nil {
						panics[i] = fmt.Sprintf("%v\n\n[worker goroutine]\n%s", v, debug.Stack())
					}
				}()
				errs[i] = fn(i)
				return nil
			})
		}
		_ = g.Wait()
		for _, v := range panics {
			if v != nil {
				panic(v)
			}
		}
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
