// Package testenv starts the real kube-apiserver + etcd that end-to-end tests use (envtest),
// with binaries built by hack/envtest-assets.sh, and gives tests free ports and a log sink.
package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AssetsDir returns KUBEBUILDER_ASSETS, building the binaries with hack/envtest-assets.sh when
// the variable is unset (cached after the first build).
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "hack", "envtest-assets.sh")
	cmd := exec.Command(script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// Start starts one envtest environment (kube-apiserver + etcd) and stops it when t ends.
func Start(t testing.TB) *envtest.Environment {
	t.Helper()
	dir, err := AssetsDir()
	if err != nil {
		t.Fatalf("envtest assets: %v", err)
	}
	env := WithTimeouts(&envtest.Environment{BinaryAssetsDirectory: dir})
	if _, err := env.Start(); err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return env
}

// ControlPlaneTimeout bounds the start and the stop of each envtest control plane process
// (etcd, kube-apiserver), in place of envtest's 20 s: a budget that a loaded 2-core machine,
// starting several apiservers at once beside tests under the race detector, can exceed. A
// process that starts in time returns at once; the bound only decides when a hung one fails.
const ControlPlaneTimeout = 2 * time.Minute

// WithTimeouts sets env's ControlPlaneStartTimeout and ControlPlaneStopTimeout to
// ControlPlaneTimeout where env leaves them zero and neither KUBEBUILDER_CONTROLPLANE_START_TIMEOUT
// nor KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT (which envtest reads) is set, and returns env. Every
// envtest.Environment a test builds goes through it (Start does).
func WithTimeouts(env *envtest.Environment) *envtest.Environment {
	if env.ControlPlaneStartTimeout == 0 && os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = ControlPlaneTimeout
	}
	if env.ControlPlaneStopTimeout == 0 && os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		env.ControlPlaneStopTimeout = ControlPlaneTimeout
	}
	return env
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// PollInterval is how often Poll and Eventually check their condition.
const PollInterval = 20 * time.Millisecond

// Poll calls cond at once and then every PollInterval until it returns nil, and returns nil
// then; when ctx ends first it returns ctx's error joined with cond's last one. It waits for a
// condition that another goroutine or process makes true (a listener up, a file written, a
// counter reached): tests poll for what they need and never sleep for a fixed time instead.
func Poll(ctx context.Context, cond func() error) error {
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// Eventually is Poll with a deadline of timeout (and t's own), failing t with what and cond's
// last error when cond never returned nil.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	if err := Poll(ctx, cond); err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, err)
	}
}

// LogSink collects every log line, for assertions on what was (and was not) logged, and
// lets a test wait for a line (WaitFor).
type LogSink struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every line; nil until WaitFor needs it
}

// Logger returns a logr.Logger at verbosity 10 that writes into s.
func (s *LogSink) Logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, prefix+" "+args)
		if s.changed != nil {
			close(s.changed)
			s.changed = nil
		}
	}, funcr.Options{Verbosity: 10})
}

// WaitFor blocks until a line containing every one of parts has been logged and returns the
// first such line; it fails when ctx ends first.
func (s *LogSink) WaitFor(ctx context.Context, parts ...string) (string, error) {
	for {
		s.mu.Lock()
		for _, l := range s.lines {
			if containsAll(l, parts) {
				s.mu.Unlock()
				return l, nil
			}
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no log line with %q: %w", parts, ctx.Err())
		case <-changed:
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// Lines returns a copy of the lines so far.
func (s *LogSink) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// String returns all lines joined by newlines.
func (s *LogSink) String() string { return strings.Join(s.Lines(), "\n") }
