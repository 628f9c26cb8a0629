package webhook

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/namespaces"
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
	// SocketPath, when set, also serves every endpoint in plain HTTP on a unix domain socket at
	// this path (created with mode 0600; a stale socket file is replaced). The file system is
	// the security boundary: put it in a directory shared only by the syncer and the sidecar.
	// Default "" (no socket).
	SocketPath string
	// DisableTCP turns the HTTPS listener off, e.g. when only SocketPath is used. Then CertFile
	// and KeyFile are not needed. Default false.
	DisableTCP bool
	// ClientCAFile, when set, makes the HTTPS listener require a client certificate signed by a
	// CA in this PEM file (mutual TLS), for deployments that bind beyond localhost. Default ""
	// (no client authentication).
	ClientCAFile string
	// StuckSlotsFactor is N of the "hook-slots" health check on /readyz and /healthz (both
	// listeners): it fails while every concurrency slot of the Runner
	// (engine.RunnerOptions.MaxConcurrent) has been held longer than N × RequestTimeout, i.e. by
	// hooks that ignore their context and were abandoned at their request's deadline; every
	// write then gets 429, so the liveness probe restarts the container and the readiness probe
	// takes the pod out of service. It passes again as soon as a slot is free. /readyz/hook-slots
	// says how many slots are held, since when and by which hooks; the start and the end are
	// logged once each. Default metrics.DefaultStuckSlotsFactor (3); < 0 turns the check off.
	StuckSlotsFactor int
	// Metrics records every request, when set, and while Start runs synchook_slots_stuck counts
	// the Runner's slots held longer than RequestTimeout. Default nil (no metrics).
	Metrics *metrics.Recorder
	// Log receives one line per request and errors. Default logr.Discard().
	Log logr.Logger
	// Namespaces, when set, is where a request's hooks find the namespace of the object
	// (labels fromNamespace, policy hooks' namespaceObject and namespaceSelector): the cluster
	// synchook serves admission for, the object's own namespace. Default nil: none, and such
	// hooks fail their requests naming it.
	Namespaces namespaces.Lookup
}

func (o *Options) setDefaults() {
	o.BindAddress = cmp.Or(o.BindAddress, DefaultBindAddress)
	o.ProbeBindAddress = cmp.Or(o.ProbeBindAddress, DefaultProbeBindAddress)
	o.MaxRequestBytes = cmp.Or(max(o.MaxRequestBytes, 0), DefaultMaxRequestBytes)
	o.RequestTimeout = cmp.Or(max(o.RequestTimeout, 0), DefaultRequestTimeout)
	o.StuckSlotsFactor = cmp.Or(o.StuckSlotsFactor, metrics.DefaultStuckSlotsFactor)
}

// Server serves one engine.Registry. Create it with NewServer; the Registry must not change
// after that.
type Server struct {
	opts   Options
	runner *engine.Runner
	caps   []byte
	mux    *http.ServeMux
	checks map[string]healthz.Checker // of /healthz and /readyz, on every listener
}

// NewServer returns a Server that runs requests with runner, with opts (defaults applied).
func NewServer(runner *engine.Runner, opts Options) (*Server, error) {
	opts.setDefaults()
	caps, err := marshalCapabilities(runner.Registry())
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, runner: runner, caps: caps, mux: http.NewServeMux()}
	s.checks = map[string]healthz.Checker{"ping": healthz.Ping}
	if opts.StuckSlotsFactor > 0 {
		slots := metrics.NewSlotCheck(runner, time.Duration(opts.StuckSlotsFactor)*opts.RequestTimeout, opts.Log)
		s.checks["hook-slots"] = func(*http.Request) error { return slots.Check() }
	}
	s.mux.Handle("/mutate/", &mutateHandler{s: s})
	s.mux.HandleFunc("/capabilities", s.serveCapabilities)
	registerHealth(s.mux, s.checks)
	return s, nil
}

// Handler returns the handler of every HTTPS endpoint, for tests and for serving it on another
// listener.
func (s *Server) Handler() http.Handler { return s.mux }

// ProbeHandler returns the handler of the plain-HTTP probe listener: /healthz and /readyz (with
// their per-check sub-paths) only, the same checks as Handler's.
func (s *Server) ProbeHandler() http.Handler {
	mux := http.NewServeMux()
	registerHealth(mux, s.checks)
	return mux
}

// Start serves HTTPS on BindAddress (and the probes on ProbeBindAddress) until ctx ends, then
// stops accepting connections, lets in-flight requests finish (up to one minute, bounded by
// their own deadlines) and returns nil. It returns an error when a listener cannot start or the
// certificate cannot be loaded.
func (s *Server) Start(ctx context.Context) error {
	if s.opts.DisableTCP && s.opts.SocketPath == "" {
		return errors.New("webhook server: DisableTCP needs a SocketPath")
	}
	if s.opts.Metrics != nil {
		defer metrics.WatchSlots(s.runner, s.opts.RequestTimeout)()
	}
	g, ctx := errgroup.WithContext(ctx)
	if !s.opts.DisableTCP {
		start, err := s.tlsServer()
		if err != nil {
			return err
		}
		g.Go(func() error { return start(ctx) })
	}
	if s.opts.SocketPath != "" {
		ln, err := listenUnix(s.opts.SocketPath)
		if err != nil {
			return err
		}
		g.Go(func() error { return serveHTTP(ctx, ln, s.mux, time.Minute, s.opts.Log) })
	}
	if s.opts.ProbeBindAddress != "0" {
		g.Go(func() error {
			ln, err := net.Listen("tcp", s.opts.ProbeBindAddress)
			if err != nil {
				return fmt.Errorf("probe listener %q: %w", s.opts.ProbeBindAddress, err)
			}
			return serveHTTP(ctx, ln, s.ProbeHandler(), 5*time.Second, s.opts.Log)
		})
	}
	return g.Wait()
}

// tlsServer prepares controller-runtime's webhook server with a certwatcher on CertFile and
// KeyFile, and returns the function that runs both until ctx ends.
func (s *Server) tlsServer() (func(context.Context) error, error) {
	host, portStr, err := net.SplitHostPort(s.opts.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("bind address %q: %w", s.opts.BindAddress, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("bind address %q: port must be 1-65535", s.opts.BindAddress)
	}
	if s.opts.CertFile == "" || s.opts.KeyFile == "" {
		return nil, errors.New("webhook server: CertFile and KeyFile are required")
	}
	watcher, err := certwatcher.New(s.opts.CertFile, s.opts.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	var clientCAs *x509.CertPool
	if s.opts.ClientCAFile != "" {
		if clientCAs, err = certs.LoadCertPool(s.opts.ClientCAFile); err != nil {
			return nil, fmt.Errorf("client CA file: %w", err)
		}
	}
	srv := crwebhook.NewServer(crwebhook.Options{
		Host: host,
		Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = watcher.GetCertificate
			c.MinVersion = tls.VersionTLS12
			c.CipherSuites = modernCipherSuites
			c.NextProtos = []string{"h2", "http/1.1"}
			if clientCAs != nil {
				c.ClientCAs = clientCAs
				c.ClientAuth = tls.RequireAndVerifyClientCert
			}
		}},
	})
	for _, path := range []string{"/mutate/", "/capabilities", "/healthz", "/healthz/", "/readyz", "/readyz/"} {
		srv.Register(path, s.mux)
	}
	return func(ctx context.Context) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return watcher.Start(ctx) })
		g.Go(func() error { return srv.Start(ctx) })
		return g.Wait()
	}, nil
}

// modernCipherSuites are the TLS 1.2 suites allowed: ECDHE key exchange with AEAD ciphers only
// (TLS 1.3 suites are not configurable and are all modern).
var modernCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,
}

// listenUnix listens on a unix socket at path with mode 0600, replacing a stale socket file.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket path %q exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %q: %w", path, err)
		}
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on unix socket %q: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod unix socket %q: %w", path, err)
	}
	return ln, nil
}

// registerHealth adds /healthz and /readyz (with their per-check sub-paths) to mux.
func registerHealth(mux *http.ServeMux, checks map[string]healthz.Checker) {
	for _, path := range []string{"/healthz", "/readyz"} {
		h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, h)
		mux.Handle(path+"/", h)
	}
}

// serveHTTP serves h in plain HTTP on ln until ctx ends, then shuts down, giving in-flight
// requests up to grace to finish.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, log logr.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	log.Info("serving plain HTTP", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	<-done
	return nil
}
