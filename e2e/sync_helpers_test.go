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
	"github.com/synchook/synchook/internal/refsyncer"
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
	envs := [2]*envtest.Environment{
		testenv.WithTimeouts(&envtest.Environment{BinaryAssetsDirectory: dir}),
		testenv.WithTimeouts(&envtest.Environment{BinaryAssetsDirectory: dir}),
	}
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
	metricsAddr                string   // of /metrics, where settledRequests reads the requests in flight
	logs                       logLines // stderr of every run, one line per log record

	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the process and waits until it answers /readyz over HTTPS with its CA. t may be
// a subtest of owner.
func (p *syncSidecar) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(p.bin, "--bind-address", p.addr, "--metrics-bind-address", p.metricsAddr, "--cert-dir", p.certDir, "--config", p.config)
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
	testenv.Eventually(t, 60*time.Second, "the sidecar's /readyz", func() error {
		select {
		case <-p.done:
			t.Fatalf("sidecar exited:\n%s", p.logs.String())
		default:
		}
		return p.ready()
	})
}

// ready returns nil once the sidecar answers /readyz with 200 over HTTPS with its CA.
func (p *syncSidecar) ready() error {
	pool, err := certs.LoadCertPool(filepath.Join(p.certDir, certs.CAFileName))
	if err != nil {
		return err
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: time.Second}).Get("https://" + p.addr + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: HTTP %d", resp.StatusCode)
	}
	return nil
}

// stop sends SIGTERM and waits for the process to exit.
func (p *syncSidecar) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatal("sidecar did not stop within a minute of SIGTERM")
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

// settledRequests is requests once the sidecar has no request in flight (its
// synchook_inflight_requests gauge, read from /metrics, is 0): the sidecar writes a request's
// log line after the response and only then counts it out of flight, so every request a
// client has had its answer to is counted.
func (p *syncSidecar) settledRequests(t *testing.T, hookType, kind, name string) int {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "no request in flight in the sidecar", func() error {
		resp, err := http.Get("http://" + p.metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, `synchook_inflight_requests{transport="admission"} `); ok && v != "0" {
				return fmt.Errorf("%s requests in flight", v)
			}
		}
		return nil
	})
	return p.requests(hookType, kind, name)
}

// waitPasses waits until the syncer has done n more passes: with n = 2, a whole pass started
// after the call.
func waitPasses(t *testing.T, syncer *refsyncer.Syncer, n int64) {
	t.Helper()
	want := syncer.Count("passes") + n
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%d more syncer passes", n), func() error {
		if got := syncer.Count("passes"); got < want {
			return fmt.Errorf("%d of %d passes", got, want)
		}
		return nil
	})
}

// quietWindow returns once d has passed and the syncer has done n more passes, whichever comes
// last: a window in which to watch that nothing changes, as long in syncer passes on a loaded
// machine (where passes take longer) as on an idle one. d measures; it synchronises nothing.
func quietWindow(t *testing.T, syncer *refsyncer.Syncer, d time.Duration, n int64) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	waitPasses(t, syncer, n)
	select {
	case <-timer.C:
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
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
