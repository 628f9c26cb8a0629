package bridgev2_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
)

// onWorker answers Mutate with whether the call runs on one of gRPC's stream workers (a
// goroutine kept between calls) rather than on a goroutine started for it.
type onWorker struct {
	pluginv2.UnimplementedPluginServer
}

func (onWorker) Mutate(context.Context, *pluginv2.Mutate_Request) (*pluginv2.Mutate_Response, error) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "grpc.(*Server).serverWorker") {
			return &pluginv2.Mutate_Response{Mutated: true}, nil
		}
		if !more {
			return &pluginv2.Mutate_Response{}, nil
		}
	}
}

// TestCallsRunOnStreamWorkers checks that, with go-plugin's broker and stdio streams open for
// the life of the connection (each holds a stream worker), calls still find a free worker: a
// call on a new goroutine grows its stack from the initial size every time (issue 27).
func TestCallsRunOnStreamWorkers(t *testing.T) {
	c := connect(t, onWorker{}, bridgev2.ServeOptions{})
	const calls = 20
	onWorkers := 0
	for range calls {
		resp, err := c.Mutate(t.Context(), &pluginv2.Mutate_Request{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetMutated() {
			onWorkers++
		}
	}
	// A call may come while its worker still returns from the one before (and, at GOMAXPROCS
	// 1, the one free worker is that one): most calls, not all, must find a worker.
	if onWorkers < calls*3/4 {
		t.Fatalf("%d of %d sequential calls ran on a stream worker, the others on a goroutine of their own", onWorkers, calls)
	}
}
