package bridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/metrics"
)

// Default values of Options.
const (
	// DefaultName is the plugin name registered when Options.Name is empty.
	DefaultName = "synchook"
	// DefaultVClusterAddress is where vcluster's plugin server listens.
	DefaultVClusterAddress = "localhost:10099"
	// DefaultRequestTimeout bounds one Mutate call; vcluster's own deadline is 10 s too.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultPollInterval is how often IsLeader is asked, to notice a restarted vcluster.
	DefaultPollInterval = 2 * time.Second
	// DefaultMaxBackoff bounds the wait between two failed attempts to reach vcluster.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultMaxMessageBytes is the largest Mutate request a Bridge made with New accepts
	// (gRPC's own default); synchook serve passes its --max-request-bytes (3 MiB) instead.
	DefaultMaxMessageBytes = 4 << 20
	// PluginVersion is the version a plugin registers with: this is plugin protocol v1.
	PluginVersion = "v1"
)

// initialBackoff is the first wait after a failed attempt to reach vcluster; it doubles up to
// Options.MaxBackoff.
const initialBackoff = 100 * time.Millisecond

// Options configures a Bridge. Zero fields take the defaults named on each.
type Options struct {
	// Address is the host:port the Plugin service listens on, as the vcluster chart sets it in
	// VCLUSTER_PLUGIN_ADDRESS (e.g. "localhost:14000"). Required. It is registered with vcluster
	// as an IP literal: "localhost" and an empty or unspecified host become 127.0.0.1, a host
	// name is resolved once at start, and port 0 becomes the port actually bound.
	Address string
	// Name is the plugin name registered with vcluster; it must be the plugin's key under the
	// chart's plugin: values (VCLUSTER_PLUGIN_NAME). Default DefaultName ("synchook").
	Name string
	// VClusterAddress is the host:port of vcluster's plugin server (service VCluster).
	// Default DefaultVClusterAddress ("localhost:10099"); "localhost" is dialled as 127.0.0.1.
	VClusterAddress string
	// RequestTimeout bounds the hook chain of one Mutate call; vcluster's deadline (10 s) wins
	// when shorter. Default DefaultRequestTimeout (10 s).
	RequestTimeout time.Duration
	// PollInterval is the time between two IsLeader calls. Default DefaultPollInterval (2 s).
	PollInterval time.Duration
	// MaxBackoff bounds the wait between failed attempts to reach vcluster; waits start at
	// 100 ms and double. Default DefaultMaxBackoff (5 s).
	MaxBackoff time.Duration
	// MaxMessageBytes is the largest Mutate request accepted, in bytes; larger ones get
	// ResourceExhausted. Default DefaultMaxMessageBytes (4 MiB, gRPC's own default) for a
	// Bridge made with New; `synchook serve` sets it to --max-request-bytes (default 3 MiB), the
	// same limit as the admission endpoint's.
	MaxMessageBytes int
	// Metrics records every Mutate call that reaches a hook chain, when set. Default nil.
	Metrics *metrics.Recorder
	// Log receives registration events, one line per Mutate call (no object data) and errors.
	// Default logr.Discard().
	Log logr.Logger
}

func (o *Options) setDefaults() {
	o.Name = cmp.Or(o.Name, DefaultName)
	o.VClusterAddress = cmp.Or(o.VClusterAddress, DefaultVClusterAddress)
	o.RequestTimeout = cmp.Or(max(o.RequestTimeout, 0), DefaultRequestTimeout)
	o.PollInterval = cmp.Or(max(o.PollInterval, 0), DefaultPollInterval)
	o.MaxBackoff = cmp.Or(max(o.MaxBackoff, 0), DefaultMaxBackoff)
	o.MaxMessageBytes = cmp.Or(max(o.MaxMessageBytes, 0), DefaultMaxMessageBytes)
}

// Bridge serves one engine.Registry as a vcluster plugin v1: the Plugin service's Mutate, and
// registration with vcluster's plugin server. Create it with New; the Registry must not change
// after that. A Bridge is safe for concurrent use.
type Bridge struct {
	remote.UnimplementedPluginServer

	opts    Options
	mutator *Mutator
	hooks   []*remote.ClientHook
}

// New returns a Bridge that runs calls with runner, with opts (defaults applied). It fails when opts.Address is
// empty, or when it or opts.VClusterAddress is not host:port.
func New(runner *engine.Runner, opts Options) (*Bridge, error) {
	opts.setDefaults()
	if opts.Address == "" {
		return nil, errors.New("vcluster plugin bridge: Address is required")
	}
	for _, a := range []struct{ what, addr string }{{"plugin address", opts.Address}, {"vcluster address", opts.VClusterAddress}} {
		if _, port, err := net.SplitHostPort(a.addr); err != nil {
			return nil, fmt.Errorf("vcluster plugin bridge: %s %q: %w", a.what, a.addr, err)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("vcluster plugin bridge: %s %q: port must be 0-65535", a.what, a.addr)
		}
	}
	m, err := NewMutator(runner, MutatorOptions{RequestTimeout: opts.RequestTimeout, Metrics: opts.Metrics, Transport: metrics.TransportGRPC, Log: opts.Log})
	if err != nil {
		return nil, fmt.Errorf("vcluster plugin bridge: %w", err)
	}
	b := &Bridge{opts: opts, mutator: m}
	for _, ch := range m.ClientHooks() {
		b.hooks = append(b.hooks, &remote.ClientHook{ApiVersion: ch.APIVersion, Kind: ch.Kind, Types: ch.Types})
	}
	return b, nil
}

// ClientHooks returns what the Bridge registers with vcluster: one ClientHook per hooked GVK
// (in the registry's order) with its hook types (in canonical order).
func (b *Bridge) ClientHooks() []*remote.ClientHook { return b.hooks }

// Run listens on Options.Address, serves the Plugin service and keeps the plugin registered
// with vcluster until ctx ends; then it stops accepting, lets in-flight calls finish and
// returns nil. It returns an error when the address cannot be resolved or bound.
func (b *Bridge) Run(ctx context.Context) error {
	log := b.opts.Log
	advertised, listenAddr, err := pluginAddresses(ctx, b.opts.Address)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listenAddr)
	if err != nil {
		return fmt.Errorf("vcluster plugin listener %q: %w", listenAddr, err)
	}
	if advertised, err = withBoundPort(advertised, ln.Addr()); err != nil {
		_ = ln.Close()
		return err
	}
	srv := grpc.NewServer(serverOptions(b.opts)...)
	remote.RegisterPluginServer(srv, b)
	log.Info("serving vcluster plugin v1", "address", ln.Addr().String(), "registeredAddress", advertised, "name", b.opts.Name)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("vcluster plugin server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		stopGracefully(srv, b.opts.RequestTimeout)
		return nil
	})
	g.Go(func() error { return b.keepRegistered(ctx, advertised) })
	return g.Wait()
}

// serverOptions keeps what each connection costs small: vcluster opens a new connection for
// every Mutate call. No interceptors or stats handlers run per connection or call (gRPC ≥ 1.85
// already shares write buffers between connections), the handshake of a connection that never
// completes it is bounded, and so are messages.
func serverOptions(o Options) []grpc.ServerOption {
	return append(ServerOptions(o.MaxMessageBytes), grpc.ConnectionTimeout(o.RequestTimeout))
}

// LongLivedStreams is the number of streams that hold a stream worker of a go-plugin server for
// as long as vcluster is connected: go-plugin's broker stream and its stdio stream. A worker
// runs one stream to its end, so ServerOptions adds that many to the workers that run calls.
const LongLivedStreams = 2

// WindowBytes is the fixed HTTP/2 flow-control window of synchook's plugin servers (per stream
// and per connection), larger than any Mutate message.
const WindowBytes = 8 << 20

// ServerOptions returns the gRPC server options of synchook's plugin servers, protocol v1 and
// v2: requests up to maxMessageBytes (0: DefaultMaxMessageBytes), a fixed window of WindowBytes
// and one stream worker per CPU plus LongLivedStreams. The fixed window turns off gRPC's
// bandwidth-delay estimation, which on vcluster's ping-pong traffic (one request, one answer)
// sends an HTTP/2 PING and reads its ack on almost every call; the stream workers run calls on
// goroutines that are kept instead of a new goroutine per call, whose stack grows from its
// initial size through the call (runtime.copystack was 6-8 % of the plugin's CPU under vcluster
// when go-plugin's streams held the only workers). Measured in BENCHMARKS.md (issue 13, "What
// changed"; issue 27).
func ServerOptions(maxMessageBytes int) []grpc.ServerOption {
	maxMessageBytes = cmp.Or(max(maxMessageBytes, 0), DefaultMaxMessageBytes)
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.InitialWindowSize(WindowBytes),
		grpc.InitialConnWindowSize(WindowBytes),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0) + LongLivedStreams)),
	}
}

// stopGracefully lets in-flight calls finish, for at most their own timeout, then closes
// every connection.
func stopGracefully(srv *grpc.Server, timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		srv.Stop()
		<-done
	}
}
