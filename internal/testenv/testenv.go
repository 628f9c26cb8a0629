// Package testenv starts the real kube-apiserver + etcd that end-to-end tests use (envtest),
// with binaries built by hack/envtest-assets.sh, and gives tests free ports and a log sink.
package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

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
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
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

// LogSink collects every log line, for assertions on what was (and was not) logged.
type LogSink struct {
	mu    sync.Mutex
	lines []string
}

// Logger returns a logr.Logger at verbosity 10 that writes into s.
func (s *LogSink) Logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
}

// Lines returns a copy of the lines so far.
func (s *LogSink) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// String returns all lines joined by newlines.
func (s *LogSink) String() string { return strings.Join(s.Lines(), "\n") }
