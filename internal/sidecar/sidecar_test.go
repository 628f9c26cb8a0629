package sidecar_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/vclusterstub"
	"github.com/synchook/synchook/webhook"
)

// hookedLabel is what the built-in default config adds.
const hookedLabel = "synchook.io/hooked"

// noEnv is a Getenv that sees an empty environment: no SYNCHOOK_CONFIG of the machine leaks in.
func noEnv(string) string { return "" }

// envOf is a Getenv that sees only env.
func envOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// freeAddr returns 127.0.0.1:port of a port that was free a moment ago. Serve's HTTPS listener
// is controller-runtime's webhook server, which takes a port number (0 meaning its default 9443),
// not a listener; the other listeners get a free port the same way so that the test can reach
// them.
func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
}

// holdAddr listens on a free loopback port until the test ends and returns its address: a
// listener that Serve would fail to open.
func holdAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// writeFile writes data to name in a new temporary directory and returns its path.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serving is one Serve running in the background.
type serving struct {
	opts   sidecar.Options
	logs   *testenv.LogSink
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Serve's result, once done is closed
}

// startServe runs Serve with opts (logging into a sink) until stop or the end of the test.
func startServe(t *testing.T, opts sidecar.Options) *serving {
	t.Helper()
	s := &serving{opts: opts, logs: &testenv.LogSink{}, done: make(chan struct{})}
	s.opts.Log = s.logs.Logger()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		s.err = sidecar.Serve(ctx, s.opts)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
		if t.Failed() {
			t.Logf("Serve's log:\n%s", s.logs.String())
		}
	})
	return s
}

// stop cancels Serve's context and returns what Serve returned; it fails t when Serve does
// not return within a minute.
func (s *serving) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case <-s.done:
		return s.err
	case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
		t.Fatal("Serve did not return within a minute of its context's end")
		return nil
	}
}

// waitReady polls https://<bind address>/readyz with the CA of the cert dir until it answers
// 200, and returns a client that trusts that CA. It fails t when Serve returns first.
func (s *serving) waitReady(t *testing.T) *http.Client {
	t.Helper()
	var hc *http.Client
	testenv.Eventually(t, time.Minute, "Serve's HTTPS /readyz", func() error {
		select {
		case <-s.done:
			t.Fatalf("Serve returned before it was ready: %v", s.err)
		default:
		}
		caPEM, err := os.ReadFile(filepath.Join(s.opts.CertDir, "ca.crt"))
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return errors.New("no certificate in ca.crt yet")
		}
		hc = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		return getOK(hc, "https://"+s.opts.Webhook.BindAddress+"/readyz")
	})
	return hc
}

func getOK(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return nil
}

// get returns the body of url, failing t unless it answers 200.
func get(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d, %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// wantFree fails t when one of addrs cannot be listened on: a listener Serve left open.
func wantFree(t *testing.T, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s is still taken after Serve returned: %v", addr, err)
			continue
		}
		ln.Close()
	}
}

func TestServeIsReadyMutatesAndStopsCleanlyWhenItsContextEnds(t *testing.T) {
	opts := sidecar.Options{
		Getenv:                      noEnv, // the built-in default config
		CertDir:                     filepath.Join(t.TempDir(), "certs"),
		ServiceAccountNamespaceFile: noNamespaceFile(t),
		MetricsBindAddress:          freeAddr(t),
		Webhook:                     webhook.Options{BindAddress: freeAddr(t), ProbeBindAddress: freeAddr(t)},
	}
	s := startServe(t, opts)
	hc := s.waitReady(t)

	t.Run("the probe listener answers /healthz and /readyz in plain HTTP", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			get(t, http.DefaultClient, "http://"+opts.Webhook.ProbeBindAddress+path)
		}
	})

	t.Run("an AdmissionReview gets the default config's patch", func(t *testing.T) {
		body, err := os.ReadFile("../../examples/pod-review.json")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Post("https://"+opts.Webhook.BindAddress+"/mutate/CreatePhysical", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || review.Response == nil {
			t.Fatalf("HTTP %d, decode: %v", resp.StatusCode, err)
		}
		if r := review.Response; !r.Allowed || r.UID != "2f4a1f60-1d1e-4c5b-9a0e-6d7b2f1c0a01" ||
			!strings.HasPrefix(string(r.Patch), `[{"op":"add","path":"/metadata/labels/synchook.io~1hooked","value":"true"}`) {
			t.Errorf("response %+v, patch %s", r, r.Patch)
		}
	})

	t.Run("the metrics listener counts the request", func(t *testing.T) {
		// a count of at least 1: the series is served at 0 from the start, and the registry is
		// the process's, which other tests of the package write to as well
		counted := regexp.MustCompile(`(?m)^synchook_requests_total\{gvk="v1/Pod",hook_type="CreatePhysical",result="patched",transport="admission"\} [1-9][0-9]*$`)
		if body := get(t, http.DefaultClient, "http://"+opts.MetricsBindAddress+"/metrics"); !counted.MatchString(body) {
			t.Errorf("/metrics lacks the admission request:\n%s", body)
		}
	})

	if err := s.stop(t); err != nil {
		t.Fatalf("Serve returned %v after its context ended, want nil", err)
	}
	wantFree(t, opts.Webhook.BindAddress, opts.Webhook.ProbeBindAddress, opts.MetricsBindAddress)
}

func TestServeWithAPluginAddressRegistersWithVClusterAndMutatesOverGRPC(t *testing.T) {
	vc := vclusterstub.Start(t, "127.0.0.1:0")
	opts := sidecar.Options{
		Getenv:                      noEnv,
		CertDir:                     filepath.Join(t.TempDir(), "certs"),
		ServiceAccountNamespaceFile: noNamespaceFile(t),
		MetricsBindAddress:          "0",
		Webhook:                     webhook.Options{BindAddress: freeAddr(t), ProbeBindAddress: "0"},
		Bridge:                      bridge.Options{Address: "127.0.0.1:0", Name: "synchook-test", VClusterAddress: vc.Addr()},
	}
	s := startServe(t, opts)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := vc.WaitForPlugin(ctx, "synchook-test")
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant", Labels: map[string]string{"app": "web"}}}
	pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "nginx"}}
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	res, err := vclusterstub.Mutate(ctx, p.GetAddress(), &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: string(data)})
	if err != nil || !res.GetMutated() || !strings.Contains(res.GetObject(), `"synchook.io/hooked":"true"`) {
		t.Fatalf("Mutate over the v1 bridge: %v, %v", res, err)
	}
	s.waitReady(t) // the HTTPS listener runs next to the bridge
	if err := s.stop(t); err != nil {
		t.Fatalf("Serve returned %v after its context ended, want nil", err)
	}
	wantFree(t, opts.Webhook.BindAddress, p.GetAddress())
}

// TestServeRefusesBadOptionsBeforeItListens gives Serve addresses that are taken: had it
// listened before checking its options, it would fail on those instead of with ErrConfig.
func TestServeRefusesBadOptionsBeforeItListens(t *testing.T) {
	typo := writeFile(t, "typo.yaml", "hooks:\n  - resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labls: {labels: {a: b}}\n")
	cases := []struct {
		name string
		set  func(*sidecar.Options)
		want string
	}{
		{"a config key typo", func(o *sidecar.Options) { o.ConfigFile = typo }, `unknown field "labls"`},
		{"a config file that does not exist", func(o *sidecar.Options) { o.ConfigFile = filepath.Join(t.TempDir(), "missing.yaml") }, "missing.yaml"},
		{"a serving cert without its key", func(o *sidecar.Options) { o.TLSCertFile = "tls.crt" }, "--tls-cert-file and --tls-key-file go together"},
		{"no HTTPS listener and no socket", func(o *sidecar.Options) { o.Webhook.DisableTCP = true }, "--socket-path"},
		{"a plugin address without a port", func(o *sidecar.Options) { o.Bridge.Address = "localhost" }, `plugin address "localhost"`},
		{"a capture sample above 1", func(o *sidecar.Options) { o.CaptureDir, o.CaptureSample = t.TempDir(), 2 }, "sample 2"},
		{"an undo key file others may write", func(o *sidecar.Options) { o.UndoKeyFile = writableKeyFile(t) }, "mode 0666 lets group or others write it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := sidecar.Options{
				Getenv:                      noEnv,
				CertDir:                     filepath.Join(t.TempDir(), "certs"),
				ServiceAccountNamespaceFile: noNamespaceFile(t),
				MetricsBindAddress:          holdAddr(t),
				Webhook:                     webhook.Options{BindAddress: holdAddr(t), ProbeBindAddress: holdAddr(t)},
			}
			tc.set(&opts)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err := sidecar.Serve(ctx, opts)
			if !errors.Is(err, sidecar.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Serve = %v, want ErrConfig naming %q", err, tc.want)
			}
		})
	}
}

// pluginV2 is one ServePluginV2 in go-plugin's test mode (in process, ended by a context).
type pluginV2 struct {
	cancel   context.CancelFunc
	reattach chan *goplugin.ReattachConfig
	closed   chan struct{} // closed by go-plugin when it has stopped serving
	done     chan struct{}
	err      error // ServePluginV2's result, once done is closed
}

func startPluginV2(t *testing.T, env map[string]string) *pluginV2 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &pluginV2{cancel: cancel, reattach: make(chan *goplugin.ReattachConfig, 1), closed: make(chan struct{}), done: make(chan struct{})}
	var logs testenv.LogSink
	go func() {
		defer close(p.done)
		p.err = sidecar.ServePluginV2(sidecar.Options{Getenv: envOf(env), Log: logs.Logger()}, bridgev2.ServeOptions{
			Stderr: io.Discard,
			Test:   &goplugin.ServeTestConfig{Context: ctx, ReattachConfigCh: p.reattach, CloseCh: p.closed},
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
		if t.Failed() {
			t.Logf("ServePluginV2's log:\n%s", logs.String())
		}
	})
	return p
}

// dispense connects to the plugin as vcluster's plugin manager does, once it has started.
func (p *pluginV2) dispense(t *testing.T) (pluginv2.PluginClient, *goplugin.Client) {
	t.Helper()
	var cfg *goplugin.ReattachConfig
	select {
	case cfg = <-p.reattach:
	case <-p.done:
		t.Fatalf("ServePluginV2 returned before serving: %v", p.err)
	case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
		t.Fatal("ServePluginV2 did not start within a minute")
	}
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  bridgev2.Handshake,
		Plugins:          goplugin.PluginSet{bridgev2.PluginName: bridgev2.ClientPlugin()},
		Reattach:         cfg,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
	})
	t.Cleanup(c.Kill)
	rpc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rpc.Dispense(bridgev2.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(pluginv2.PluginClient), c
}

func TestServePluginV2AnnouncesItsHooksMutatesAndStopsWhenItsContextEnds(t *testing.T) {
	metricsAddr := freeAddr(t)
	// No PLUGIN_CONFIG: the default config; a key file, as no Initialize brings the key Secret.
	p := startPluginV2(t, map[string]string{sidecar.MetricsBindAddressEnvVar: metricsAddr, sidecar.UndoKeyFileEnvVar: keyFile(t)})
	pc, c := p.dispense(t)
	ctx := t.Context()

	cfg, err := pc.GetPluginConfig(ctx, &pluginv2.GetPluginConfig_Request{})
	if err != nil || !strings.Contains(cfg.GetConfig(), `"kind":"Pod"`) {
		t.Fatalf("GetPluginConfig = %v, %v; want the default config's Pod hooks", cfg, err)
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pc.Mutate(ctx, &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: string(hooks.CreatePhysical), Object: string(data)})
	if err != nil || !res.GetMutated() {
		t.Fatalf("Mutate = %v, %v", res, err)
	}
	if err := json.Unmarshal([]byte(res.GetObject()), pod); err != nil || pod.Labels[hookedLabel] != "true" {
		t.Errorf("mutated pod labels %v (%v), want %s", pod.Labels, err, hookedLabel)
	}
	// SYNCHOOK_METRICS_BIND_ADDRESS opens a /metrics listener; it starts next to go-plugin's.
	testenv.Eventually(t, time.Minute, "the plugin's /metrics", func() error {
		body, err := func() (string, error) {
			resp, err := http.Get("http://" + metricsAddr + "/metrics")
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		}()
		if err == nil && !strings.Contains(body, `transport="pluginv2"`) {
			err = errors.New("no pluginv2 request counted")
		}
		return err
	})

	c.Kill()
	p.cancel()
	select {
	case <-p.done:
	case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
		t.Fatal("ServePluginV2 did not return within a minute of its context's end")
	}
	if p.err != nil {
		t.Fatalf("ServePluginV2 = %v after its context ended, want nil", p.err)
	}
	<-p.closed
	// The metrics listener is shut down on the way out, without ServePluginV2 waiting for it.
	testenv.Eventually(t, time.Minute, "the metrics port free again", func() error {
		ln, err := net.Listen("tcp", metricsAddr)
		if err == nil {
			ln.Close()
		}
		return err
	})
}

func TestServePluginV2RefusesABadConfigBeforeTheHandshake(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"a config key typo in PLUGIN_CONFIG": {bridgev2.ConfigEnvVar: "hooks:\n  - resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labls: {labels: {a: b}}\n"},
		"a capture sample that is no number": {sidecar.CaptureDirEnvVar: t.TempDir(), sidecar.CaptureSampleEnvVar: "all"},
	} {
		t.Run(name, func(t *testing.T) {
			p := startPluginV2(t, env)
			select {
			case <-p.done:
			case cfg := <-p.reattach:
				t.Fatalf("the plugin served (%v) with a bad config", cfg)
			case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
				t.Fatal("ServePluginV2 neither failed nor served within a minute")
			}
			if !errors.Is(p.err, sidecar.ErrConfig) {
				t.Errorf("ServePluginV2 = %v, want ErrConfig", p.err)
			}
		})
	}
}

func TestMutateRunsTheChainOffline(t *testing.T) {
	keys, err := sidecar.LoadKeys(keyFile(t))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := sidecar.BuildRegistry(t.Context(), sidecar.RegistryConfig{Getenv: noEnv, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"tenant","labels":{"app":"web"}}}`
	res, err := sidecar.Mutate(t.Context(), reg, hooks.CreatePhysical, []byte(pod), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Hooks == 0 || !strings.Contains(string(res.Patch), `"path":"/metadata/labels/synchook.io~1hooked"`) || !strings.Contains(string(res.Object), `"synchook.io/hooked":"true"`) {
		t.Errorf("Mutate = hooks %d, patch %s, object %s", res.Hooks, res.Patch, res.Object)
	}
	if _, err := sidecar.Mutate(t.Context(), reg, hooks.CreatePhysical, []byte(`{"metadata":{}}`), time.Second); err == nil {
		t.Error("an object without apiVersion and kind was mutated")
	}
}

// writableKeyFile returns a valid undo key ring file of mode 0666.
func writableKeyFile(t *testing.T) string {
	t.Helper()
	path := keyFile(t)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	return path
}

// keyFile writes a new undo key ring to a file of the test's own (mode 0600) and returns its
// path: what --undo-key-file and SYNCHOOK_UNDO_KEY_FILE name.
func keyFile(t *testing.T) string {
	t.Helper()
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	text, err := ring.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "undo.keys")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
