package hookclient_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/hookclient"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/webhook"
)

// labelFn returns a hook function that sets label key to value and removes the label "drop".
func labelFn(key, value string) hooks.MutateFunc {
	return func(_ context.Context, o client.Object) (client.Object, error) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		delete(l, "drop")
		l[key] = value
		o.SetLabels(l)
		return o, nil
	}
}

func refuseFn(_ context.Context, _ client.Object) (client.Object, error) {
	return nil, errors.New("not this one")
}

// authority creates a CA and a serving certificate for localhost and 127.0.0.1 in a new
// directory.
func authority(t testing.TB) *certs.Authority {
	t.Helper()
	a, err := certs.New(certs.Options{Dir: filepath.Join(t.TempDir(), "certs")})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Ensure(); err != nil {
		t.Fatal(err)
	}
	return a
}

func keyPair(t testing.TB, a *certs.Authority) *tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(a.CertFile(), a.KeyFile())
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// copyFile copies the file from to the file to (created or replaced).
func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// sidecar is a real webhook.Server handler served over TLS on a loopback listener, with
// counters.
type sidecar struct {
	URL    string
	CAFile string // a copy of the CA that tests may overwrite
	cert   atomic.Pointer[tls.Certificate]
	srv    *http.Server

	mu         sync.Mutex
	requests   map[string]int // by path
	protos     map[int]int    // by HTTP major version
	conns      []net.Conn     // open ones
	connCount  int
	connClosed chan struct{} // closed and replaced whenever a connection closes
}

// startSidecar serves reg on 127.0.0.1 (on addr when not empty). wrap, when not nil, wraps the
// real handler.
func startSidecar(t testing.TB, reg *engine.Registry, addr string, wrap func(http.Handler) http.Handler) *sidecar {
	t.Helper()
	ws, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := ws.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	a := authority(t)
	s := &sidecar{CAFile: filepath.Join(t.TempDir(), "ca.crt"), requests: map[string]int{}, protos: map[int]int{}, connClosed: make(chan struct{})}
	copyFile(t, a.CAFile(), s.CAFile)
	s.cert.Store(keyPair(t, a))
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.URL = "https://" + ln.Addr().String()
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.requests[r.URL.Path]++
			s.protos[r.ProtoMajor]++
			s.mu.Unlock()
			h.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
		},
		ConnState: func(c net.Conn, state http.ConnState) {
			s.mu.Lock()
			defer s.mu.Unlock()
			switch state {
			case http.StateNew:
				s.conns = append(s.conns, c)
				s.connCount++
			case http.StateClosed, http.StateHijacked:
				s.conns = slices.DeleteFunc(s.conns, func(o net.Conn) bool { return o == c })
				close(s.connClosed)
				s.connClosed = make(chan struct{})
			}
		},
		ErrorLog: log.New(io.Discard, "", 0), // aborted handshakes are expected in these tests
	}
	go func() { _ = s.srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// count returns the number of requests to path so far.
func (s *sidecar) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// mutations returns the number of POST /mutate/... requests so far.
func (s *sidecar) mutations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, c := range s.requests {
		if strings.HasPrefix(p, "/mutate/") {
			n += c
		}
	}
	return n
}

// closeConns makes the client drop every connection the server accepted, so that the next
// request needs a new handshake. The server ends each one (a TLS close_notify) and waits until
// the client has closed it in turn: had the server only closed them, the client could send its
// next request on a connection it has not yet seen closed, and such a request may have reached
// the server, so the client would not retry it.
func (s *sidecar) closeConns(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	ending := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, c := range ending {
		if tc, ok := c.(*tls.Conn); !ok || tc.CloseWrite() != nil {
			_ = c.Close() // no handshake yet: the client has never used it
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang, not a synchronisation
	defer cancel()
	for {
		s.mu.Lock()
		open := slices.ContainsFunc(s.conns, func(c net.Conn) bool { return slices.Contains(ending, c) })
		closed := s.connClosed
		s.mu.Unlock()
		if !open {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the client did not close its connections after the server ended them")
		case <-closed:
		}
	}
}

func newClient(t testing.TB, s *sidecar, opts hookclient.Options) *hookclient.Client {
	t.Helper()
	if opts.URL == "" {
		opts.URL = s.URL
	}
	if opts.CAFile == "" {
		opts.CAFile = s.CAFile
	}
	c, err := hookclient.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func registry(t *testing.T, hs ...hooks.ClientHook) *engine.Registry {
	t.Helper()
	reg := engine.NewRegistry(nil)
	for _, h := range hs {
		if err := reg.Register(h); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

// freePort returns a loopback address that nothing listens on (a moment ago).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func drain(r io.Reader) { _, _ = io.Copy(io.Discard, r) }
