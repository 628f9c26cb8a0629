package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/internal/testenv"
)

// startSyncClusters starts two envtest environments (kube-apiserver + etcd) at the same time, the
// virtual and the host cluster, and stops them when t ends.
func startSyncClusters(t *testing.T) (virtual, host *rest.Config) {
	t.Helper()
	dir, err := testenv.AssetsDir()
	if err != nil {
		t.Fatalf("envtest assets: %v", err)
	}
	envs := [2]*envtest.Environment{{BinaryAssetsDirectory: dir}, {BinaryAssetsDirectory: dir}}
	var (
		wg   sync.WaitGroup
		errs [2]error
	)
	for i, env := range envs {
		wg.Go(func() { _, errs[i] = env.Start() })
	}
	wg.Wait()
	for i, env := range envs {
		if errs[i] == nil {
			t.Cleanup(func() {
				if err := env.Stop(); err != nil {
					t.Errorf("stop envtest: %v", err)
				}
			})
		}
	}
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	return envs[0].Config, envs[1].Config
}

// buildSyncSidecar builds ./testsidecar into a temporary directory and returns the binary.
func buildSyncSidecar(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "testsidecar")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./testsidecar").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./testsidecar: %w\n%s", err, out)
	}
	return bin, nil
}

// logLines collects the lines written to it, for assertions on a process's log.
type logLines struct {
	mu  sync.Mutex
	all []string
}

func (l *logLines) consume(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l.mu.Lock()
		l.all = append(l.all, sc.Text())
		l.mu.Unlock()
	}
}

// count returns the number of lines that contain every one of parts.
func (l *logLines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.all {
		if lineHasAll(line, parts) {
			n++
		}
	}
	return n
}

// lastField returns the JSON string value of field in the last line that contains every one
// of parts, or "" when there is none.
func (l *logLines) lastField(field string, parts ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.all) - 1; i >= 0; i-- {
		if !lineHasAll(l.all[i], parts) {
			continue
		}
		_, after, ok := strings.Cut(l.all[i], `"`+field+`":"`)
		if !ok {
			return ""
		}
		value, _, _ := strings.Cut(after, `"`)
		return value
	}
	return ""
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

func lineHasAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// syncSidecar is the test sidecar binary run as its own process; it can be stopped and
// started again on the same port with the same cert dir.
type syncSidecar struct {
	owner                      *testing.T // the test that outlives every start: it kills a running process at its end
	bin, addr, certDir, config string
	logs                       logLines // stderr of every run, one line per log record

	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the process and waits until it answers /readyz over HTTPS with its CA. t may be
// a subtest of owner.
func (p *syncSidecar) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(p.bin, "--bind-address", p.addr, "--cert-dir", p.certDir, "--config", p.config)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		p.logs.consume(stderr)
		_ = cmd.Wait()
		close(p.done)
	}()
	p.owner.Cleanup(func() {
		if p.cmd == cmd {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p.ready() {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("sidecar exited:\n%s", p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar not ready after 20s:\n%s", p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *syncSidecar) ready() bool {
	pool, err := certs.LoadCertPool(filepath.Join(p.certDir, certs.CAFileName))
	if err != nil {
		return false
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: time.Second}).Get("https://" + p.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stop sends SIGTERM and waits for the process to exit.
func (p *syncSidecar) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatal("sidecar did not stop within 15s of SIGTERM")
	}
	p.cmd = nil
}

// requests counts the sidecar's per-request log lines for hookType and kind, and for the
// object name when name is not empty.
func (p *syncSidecar) requests(hookType, kind, name string) int {
	parts := []string{`"hookType":"` + hookType + `"`, `"gvk":"/v1, Kind=` + kind + `"`}
	if name != "" {
		parts = append(parts, `"name":"`+name+`"`)
	}
	return p.logs.count(parts...)
}

// settledRequests is requests once the count has not changed for 300 ms (at most 10 s): the
// sidecar writes its log line after the response, so lines lag behind what clients saw.
func (p *syncSidecar) settledRequests(hookType, kind, name string) int {
	n, stable := p.requests(hookType, kind, name), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if m := p.requests(hookType, kind, name); m != n {
			n, stable = m, time.Now()
		} else if time.Since(stable) >= 300*time.Millisecond {
			break
		}
	}
	return n
}

// waitUntil calls cond every 50 ms until it returns true or timeout passes, then fails t with
// the message and the last error.
func waitUntil(t *testing.T, timeout time.Duration, msg string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last error: %v)", msg, timeout, lastErr)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeFile writes data to a new file in dir and returns its path.
func writeSyncFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
