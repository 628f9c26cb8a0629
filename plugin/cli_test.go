package plugin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/internal/testenv"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := New().run(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestMutatePrintsThePatchAndTheResult(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	code, out, errOut := runCLI(t, "mutate", "--type", "CreatePhysical", "-f", "../examples/pod.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Without --undo-key-file the undo is sealed with a throwaway key, and stderr says so.
	for _, want := range []string{
		`[{"op":"add","path":"/metadata/labels/synchook.io~1hooked","value":"true"},` +
			`{"op":"add","path":"/metadata/annotations","value":{"synchook.io/undo":"s2.`,
		`synchook.io/hooked: "true"`,
		"app: web",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if want := "no --undo-key-file: sealed with a throwaway key; a round trip through `synchook mutate` of a GetPhysical needs the file"; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
}

func TestBadInputExitsTwoNamingWhatWasWrong(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	os.WriteFile(typo, []byte("hooks:\n  - resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labls: {labels: {a: b}}\n"), 0o600)
	badType := filepath.Join(dir, "type.yaml")
	os.WriteFile(badType, []byte("hooks:\n  - resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatPhysical]\n    labels: {labels: {a: b}}\n"), 0o600)
	keyFile := filepath.Join(dir, "keys")
	_, keys, _ := runCLI(t, "undo-key")
	os.WriteFile(keyFile, []byte(keys), 0o600)
	os.Chmod(keyFile, 0o666) // past the umask
	const writable = "mode 0666 lets group or others write it"
	captureDir := filepath.Join(t.TempDir(), "capture")
	captureTraffic(t, teamConfig(t, dir, "a"), captureDir)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"an undo key file others may write, to mutate", []string{"mutate", "--undo-key-file", keyFile, "--type", "CreatePhysical", "-f", "../examples/pod.yaml"}, writable},
		{"an undo key file others may write, to replay", []string{"replay", captureDir, "--undo-key-file", keyFile}, writable},
		{"an undo key file others may write, to serve", []string{"serve", "--undo-key-file", keyFile, "--health-probe-bind-address", "0", "--metrics-bind-address", "0"}, writable},
		{"a config key typo", []string{"mutate", "--type", "CreatePhysical", "-f", "../examples/pod.yaml", "--config", typo}, `unknown field "labls"`},
		{"an unknown hook type in config", []string{"mutate", "--type", "CreatePhysical", "-f", "../examples/pod.yaml", "--config", badType}, `unknown hook type "CreatPhysical"`},
		{"an unknown hook type flag", []string{"mutate", "--type", "ApplyPhysical", "-f", "../examples/pod.yaml"}, "valid: CreatePhysical"},
		{"a config typo stops serve", []string{"serve", "--config", typo, "--health-probe-bind-address", "0"}, `unknown field "labls"`},
		{"an unknown command", []string{"srve"}, `unknown command "srve"`},
	}
	for _, tc := range cases {
		t.Run(tc.name+" exits 2", func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	for _, tc := range []struct {
		command string
		flags   []string
	}{
		{"serve", []string{"--config", "--bind-address", "--cert-dir", "--cert-dns-name", "--health-probe-bind-address", "--zap-log-level", `(default "127.0.0.1:9443")`}},
		{"mutate", []string{"--config", "--type", "-f, --filename", "-o, --output"}},
	} {
		t.Run(tc.command+" --help lists its flags", func(t *testing.T) {
			code, out, _ := runCLI(t, tc.command, "--help")
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			for _, flag := range tc.flags {
				if !strings.Contains(out, flag) {
					t.Errorf("%s --help lacks %s", tc.command, flag)
				}
			}
		})
	}
}

// TestServeQuickstart runs the real binary as README's quickstart does: default config, its own
// certs, the example AdmissionReview; then SIGTERM must exit 0. The quickstart's addresses are
// serve's defaults, read from its flags; the test serves on free ports instead, so that it
// passes while something else (a `make run` left open) holds the default ones.
func TestServeQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	fs, _, _ := serveFlags(func(string) string { return "" })
	defaults := map[string]string{}
	for _, name := range []string{"bind-address", "health-probe-bind-address", "metrics-bind-address", "cert-dir"} {
		defaults[name] = fs.Lookup(name).DefValue
	}
	if want := map[string]string{
		"bind-address": "127.0.0.1:9443", "health-probe-bind-address": ":9440", "metrics-bind-address": ":9441", "cert-dir": "/tmp/synchook/certs",
	}; fmt.Sprint(defaults) != fmt.Sprint(want) {
		t.Errorf("serve's defaults %v, want %v (README's quickstart and the chart use them)", defaults, want)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, defaultPort, _ := net.SplitHostPort(defaults["bind-address"])
	for _, want := range []string{
		"https://localhost:" + defaultPort + "/mutate/CreatePhysical", "--cacert " + defaults["cert-dir"] + "/ca.crt",
		`"synchook.io/undo":"s2.n.<key ID>.<sealed record>"`, defaults["cert-dir"] + "/undo.keys",
	} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Errorf("README's quickstart lacks %q (serve's defaults)", want)
		}
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "synchook")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	port, probe, metricsPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	certDir := filepath.Join(dir, "certs")
	cmd := exec.Command(bin, "serve", "--cert-dir", certDir,
		"--bind-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probe),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort))
	cmd.Env = append(os.Environ(), "SYNCHOOK_CONFIG=")
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()

	var hc *http.Client
	testenv.Eventually(t, 60*time.Second, "the sidecar's /readyz", func() error {
		select {
		case <-exited:
			t.Fatalf("serve exited early (%v):\n%s", waitErr, logs.String())
		default:
		}
		caPEM, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		hc = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := hc.Get(fmt.Sprintf("https://localhost:%d/readyz", port))
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	for what, url := range map[string]string{
		"probe listener":   fmt.Sprintf("http://127.0.0.1:%d/healthz", probe),
		"metrics listener": fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
	} {
		resp, err := http.Get(url)
		if err != nil {
			t.Errorf("%s %s: %v", what, url, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s: HTTP %d", what, url, resp.StatusCode)
		}
	}

	body, _ := os.ReadFile("../examples/pod-review.json")
	resp, err := hc.Post(fmt.Sprintf("https://localhost:%d/mutate/CreatePhysical", port), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var review admissionv1.AdmissionReview
	err = json.NewDecoder(resp.Body).Decode(&review)
	resp.Body.Close()
	if err != nil || review.Response == nil {
		t.Fatalf("decode response: %v", err)
	}
	if !review.Response.Allowed || review.Response.UID != "2f4a1f60-1d1e-4c5b-9a0e-6d7b2f1c0a01" ||
		!strings.HasPrefix(string(review.Response.Patch), `[{"op":"add","path":"/metadata/labels/synchook.io~1hooked","value":"true"},{"op":"add","path":"/metadata/annotations","value":{"synchook.io/undo":"s2.`) {
		t.Errorf("response = %+v, patch %s", review.Response, review.Response.Patch)
	}
	// The key README promises: created beside the certificates, 0600.
	if info, err := os.Stat(filepath.Join(certDir, "undo.keys")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("undo.keys beside the certificates: %v, %v; want mode 0600", info, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("after SIGTERM: %v\n%s", waitErr, logs.String())
		}
	case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
		t.Fatalf("serve still running a minute after SIGTERM:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"patchOperations":2`) {
		t.Errorf("no structured request log line:\n%s", logs.String())
	}
}

func TestServeRefusesBadOptionsBeforeStartingAnyListener(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	metricsPort := testenv.FreePort(t)
	code, _, errOut := runCLI(t, "serve", "--cert-dir", t.TempDir(), "--tls-cert-file", "only-a-cert.pem",
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--health-probe-bind-address", "0")
	if code != 2 || !strings.Contains(errOut, "--tls-cert-file and --tls-key-file go together") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "serve", "--bind-address", "0", "--cert-dir", t.TempDir(), "--health-probe-bind-address", "0")
	if code != 2 || !strings.Contains(errOut, "--socket-path") {
		t.Fatalf("--bind-address=0 without a socket: exit %d, stderr %q", code, errOut)
	}
	// Nothing was listening: the metrics port is still free.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", metricsPort))
	if err != nil {
		t.Fatalf("the metrics listener was started before the options were checked: %v", err)
	}
	ln.Close()
}

func TestGetPhysicalOfCreatePhysicalGivesTheInputBack(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	in, err := os.ReadFile("../examples/pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	code, keys, errOut := runCLI(t, "undo-key")
	if code != 0 {
		t.Fatalf("undo-key: exit %d: %s", code, errOut)
	}
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "mutate", "--undo-key-file", keyFile, "--type", "CreatePhysical", "-f", "../examples/pod.yaml", "-o", "yaml")
	if code != 0 {
		t.Fatalf("CreatePhysical: exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "throwaway") {
		t.Errorf("a throwaway key with --undo-key-file: %s", errOut)
	}
	hooked := filepath.Join(t.TempDir(), "hooked.yaml")
	if err := os.WriteFile(hooked, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	code, back, errOut := runCLI(t, "mutate", "--undo-key-file", keyFile, "--type", "GetPhysical", "-f", hooked, "-o", "yaml")
	if code != 0 {
		t.Fatalf("GetPhysical: exit %d: %s", code, errOut)
	}
	var want, got corev1.Pod
	if err := yaml.UnmarshalStrict(in, &want); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(back), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Annotations) == 0 {
		got.Annotations = nil
	}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("GetPhysical(CreatePhysical(pod.yaml)) differs from pod.yaml:\n%s\nhooked:\n%s", back, out)
	}
}

// appendToleration is a hook that is not idempotent: it appends a toleration on every run.
type appendToleration struct{}

func (appendToleration) Name() string            { return "append-toleration" }
func (appendToleration) Resource() client.Object { return &corev1.Pod{} }
func (appendToleration) MutateUpdatePhysical(_ context.Context, o client.Object) (client.Object, error) {
	p := o.(*corev1.Pod)
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpExists})
	return p, nil
}

func TestAHookThatIsNotIdempotentStopsTheStart(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	p := New()
	if err := p.Register(appendToleration{}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := p.run([]string{"mutate", "--type", "UpdatePhysical", "-f", "../examples/pod.yaml"}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `hook "append-toleration" UpdatePhysical Pod is not idempotent`) || !strings.Contains(stderr.String(), "/spec/tolerations/") {
		t.Errorf("exit %d, stderr %q; want 2 naming the hook and the path", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = p.run([]string{"mutate", "--skip-idempotency-check", "--type", "UpdatePhysical", "-f", "../examples/pod.yaml"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Errorf("--skip-idempotency-check: exit %d, %s", code, stderr.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a process's output copier and the test's reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
