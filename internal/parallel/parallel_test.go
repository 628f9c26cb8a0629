package parallel_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/synchook/synchook/internal/parallel"
)

func TestForRunsEveryIndexOnceAndReportsTheLowestError(t *testing.T) {
	// At least two workers, so that item 30 can wait for a higher index to fail first.
	prev := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	var calls [100]atomic.Int32
	var once sync.Once
	higherFailed := make(chan struct{})
	err := parallel.For(len(calls), func(i int) error {
		calls[i].Add(1)
		if i >= 30 {
			if i == 30 {
				<-higherFailed
			} else {
				once.Do(func() { close(higherFailed) })
			}
			return fmt.Errorf("item %d", i)
		}
		return nil
	})
	if err == nil || err.Error() != "item 30" {
		t.Errorf("error = %v, want item 30", err)
	}
	for i := range calls {
		if n := calls[i].Load(); n != 1 {
			t.Errorf("fn(%d) ran %d times", i, n)
		}
	}
}

func TestForWithNothingOrOne(t *testing.T) {
	if err := parallel.For(0, func(int) error { return errors.New("called") }); err != nil {
		t.Errorf("n=0: %v", err)
	}
	if err := parallel.For(1, func(i int) error { return fmt.Errorf("only %d", i) }); err == nil || err.Error() != "only 0" {
		t.Errorf("n=1: %v", err)
	}
}

func TestForRaisesAWorkersPanicOnTheCallingGoroutine(t *testing.T) {
	var ran atomic.Int32
	defer func() {
		v := recover()
		if v == nil || !strings.Contains(fmt.Sprint(v), "item 3 broke") {
			t.Errorf("recovered %v, want the panic of item 3", v)
		}
		if n := ran.Load(); runtime.GOMAXPROCS(0) > 1 && n != 10 {
			t.Errorf("%d of 10 calls ran before the panic was raised", n)
		}
	}()
	_ = parallel.For(10, func(i int) error {
		ran.Add(1)
		if i == 3 || i == 7 {
			panic(fmt.Sprintf("item %d broke", i))
		}
		return nil
	})
	t.Error("For returned instead of panicking")
}
