package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/synchook/synchook/hooks"
)

// Default values of Options.
const (
	DefaultBindAddress      = "127.0.0.1:9443"
	DefaultProbeBindAddress = ":9440"
	DefaultMaxRequestBytes  = 3 << 20 // 3 MiB
	DefaultRequestTimeout   = 10 * time.Second
)

// Options configures a Server. Zero fields take the defaults named on each.
type Options struct {
	// BindAddress is the host:port of the HTTPS listener. Default DefaultBindAddress
	// (127.0.0.1:9443): loopback only, as the syncer runs in the same pod.
	BindAddress string
	// ProbeBindAddress is the host:port of the plain-HTTP listener that serves only /healthz and
	// /readyz for kubelet probes. Default DefaultProbeBindAddress (":9440", all interfaces);
	// "0" disables it.
	ProbeBindAddress string
	// CertFile and KeyFile are the PEM serving certificate and key. They are reloaded when they
	// change on disk (controller-runtime certwatcher). Required by Start.
	CertFile, KeyFile string
	// MaxRequestBytes is the largest request body accepted, in bytes; larger bodies get 413 and
	// are not read further. Default DefaultMaxRequestBytes (3 MiB).
	MaxRequestBytes int64
	// RequestTimeout bounds the time one request may spend in its hook chain. A shorter
	// ?timeout= query parameter (as kube-apiserver sends) wins. Default DefaultRequestTimeout (10 s).
	RequestTimeout time.Duration
	// Log receives one line per request and errors. Default logr.Discard().
	Log logr.Logger
}

func (o *Options) setDefaults() {
	if o.BindAddress == "" {
		o.BindAddress = DefaultBindAddress
	}
	if o.ProbeBindAddress == "" {
		o.ProbeBindAddress = DefaultProbeBindAddress
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
}

// Server serves one hooks.Registry. Create it with NewServer; the Registry must not change
// after that.
type Server struct {
	opts     Options
	registry *hooks.Registry
	caps     []byte
	mux      *http.ServeMux
}

// NewServer returns a Server for reg with opts (defaults applied).
func NewServer(reg *hooks.Registry, opts Options) (*Server, error) {
	opts.setDefaults()
	caps, err := marshalCapabilities(reg)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, registry: reg, caps: caps, mux: http.NewServeMux()}
	s.mux.Handle("/mutate/", &mutateHandler{s: s})
	s.mux.HandleFunc("/capabilities", s.serveCapabilities)
	registerHealth(s.mux)
	return s, nil
}

// Handler returns the handler of every HTTPS endpoint, for tests and for serving it on another
// listener.
func (s *Server) Handler() http.Handler { return s.mux }

// Start serves HTTPS on BindAddress (and the probes on ProbeBindAddress) until ctx ends, then
// stops accepting connections, lets in-flight requests finish (up to one minute, bounded by
// their own deadlines) and returns nil. It returns an error when a listener cannot start or the
// certificate cannot be loaded.
func (s *Server) Start(ctx context.Context) error {
	host, portStr, err := net.SplitHostPort(s.opts.BindAddress)
	if err != nil {
		return fmt.Errorf("bind address %q: %w", s.opts.BindAddress, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return fmt.Errorf("bind address %q: port must be 1-65535", s.opts.BindAddress)
	}
	if s.opts.CertFile == "" || s.opts.KeyFile == "" {
		return errors.New("webhook server: CertFile and KeyFile are required")
	}
	watcher, err := certwatcher.New(s.opts.CertFile, s.opts.KeyFile)
	if err != nil {
		return fmt.Errorf("load serving certificate: %w", err)
	}
	srv := crwebhook.NewServer(crwebhook.Options{
		Host: host,
		Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = watcher.GetCertificate
			c.MinVersion = tls.VersionTLS12
			c.NextProtos = []string{"h2", "http/1.1"}
		}},
	})
	for _, path := range []string{"/mutate/", "/capabilities", "/healthz", "/healthz/", "/readyz", "/readyz/"} {
		srv.Register(path, s.mux)
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return watcher.Start(ctx) })
	g.Go(func() error { return srv.Start(ctx) })
	if s.opts.ProbeBindAddress != "0" {
		g.Go(func() error { return serveProbes(ctx, s.opts.ProbeBindAddress, s.opts.Log) })
	}
	return g.Wait()
}

// registerHealth adds /healthz and /readyz (with their per-check sub-paths) to mux.
func registerHealth(mux *http.ServeMux) {
	checks := map[string]healthz.Checker{"ping": healthz.Ping}
	for _, path := range []string{"/healthz", "/readyz"} {
		h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, h)
		mux.Handle(path+"/", h)
	}
}

// serveProbes serves /healthz and /readyz in plain HTTP on addr until ctx ends.
func serveProbes(ctx context.Context, addr string, log logr.Logger) error {
	mux := http.NewServeMux()
	registerHealth(mux)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("probe listener %q: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	log.Info("serving health probes", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("probe listener: %w", err)
	}
	return nil
}
