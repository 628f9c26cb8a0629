package sidecar

import (
	"context"
	"net/http"
	"net/http/pprof"

	"github.com/go-logr/logr"

	"github.com/synchook/synchook/internal/metrics"
)

// PprofBindAddressEnvVar names the environment variable that, in plugin v2 mode, gives the
// host:port of a plain-HTTP net/http/pprof listener (/debug/pprof/...), to profile synchook
// inside a syncer (e2e/vcluster's TestVClusterSyncerThroughput uses it); unset or "0": none.
// It serves profiles and the command line to whoever reaches it: bind it to loopback, and only
// while measuring.
const PprofBindAddressEnvVar = "SYNCHOOK_PPROF_BIND_ADDRESS"

// servePprof serves net/http/pprof's handlers on addr until ctx ends.
func servePprof(ctx context.Context, addr string, log logr.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return metrics.ServeHTTP(ctx, "pprof", addr, mux, log)
}

// serveFromEnv starts serve, on its own goroutine, on the address that the environment
// variable envVar gives (unset or "0": nothing), with a logger named name; a listener that
// stops logs why. It returns what stops it.
func serveFromEnv(opts *Options, envVar, name string, serve func(ctx context.Context, addr string, log logr.Logger) error) (stop func()) {
	addr := opts.Getenv(envVar)
	if addr == "" || addr == "0" {
		return func() {}
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		if err := serve(ctx, addr, opts.Log.WithName(name)); err != nil {
			opts.Log.Error(err, name+" listener stopped", "address", addr)
		}
	}()
	return stop
}
