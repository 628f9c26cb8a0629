package sidecar

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
)

// PprofBindAddressEnvVar names the environment variable that, in plugin v2 mode, gives the
// host:port of a plain-HTTP net/http/pprof listener (/debug/pprof/...), to profile synchook
// inside a syncer (e2e/vcluster's TestVClusterSyncerThroughput uses it); unset or "0": none.
// It serves profiles and the command line to whoever reaches it: bind it to loopback, and only
// while measuring.
const PprofBindAddressEnvVar = "SYNCHOOK_PPROF_BIND_ADDRESS"

// servePprof serves net/http/pprof's handlers on addr until ctx ends.
func servePprof(ctx context.Context, addr string, log logr.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("serving pprof", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
