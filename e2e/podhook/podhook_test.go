package podhook

// This test is the proof that an external module with one Go hook and
// plugin.MustInit/MustRegister/MustStart is the whole synchook program: it builds
// examples/pod-hook (its own module) once, as a hook author would, and mutates a pod through the binary's four ways in — the
// offline mutate command, the HTTPS admission endpoint of serve, serve's vcluster plugin v1 gRPC
// bridge, and the vcluster plugin v2 that vcluster starts with hashicorp/go-plugin.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
)

const (
	// tenant is the default of the example's Settings.Tenant (no settings in the config).
	tenant = "team-a"
	// startTimeout bounds every wait for the binary: the machine is shared with other builds.
	startTimeout = 90 * time.Second
)

// TenantLabel is the label examples/pod-hook adds (its main.go's TenantLabel).
const TenantLabel = "example.com/tenant"

func TestPodHookExample(t *testing.T) {
	bin := buildExample(t)

	t.Run("mutate on CreatePhysical prints a JSON Patch that adds the tenant label to examples/pod.yaml", func(t *testing.T) {
		stdout := runMutate(t, bin, "CreatePhysical", "../../examples/pod.yaml")
		patch, result := parseMutateOutput(t, stdout)
		wantOp(t, patch, jsonOp{Op: "add", Path: "/metadata/labels/example.com~1tenant", Value: tenant})
		// No synchook.io/hooked: a binary with Go hooks runs no built-in default config.
		want := map[string]string{"app": "web", TenantLabel: tenant}
		if got := result.Labels; !maps.Equal(got, want) {
			t.Errorf("result labels %v, want %v", got, want)
		}
	})

	t.Run("mutate on GetPhysical of the CreatePhysical result gives examples/pod.yaml back (automatic undo, no Get hook)", func(t *testing.T) {
		// One key for both runs: without --undo-key-file each seals with a throwaway key.
		keyFile := filepath.Join(t.TempDir(), "keys")
		keys, err := exec.Command(bin, "undo-key").Output()
		if err != nil {
			t.Fatalf("undo-key: %v", err)
		}
		if err := os.WriteFile(keyFile, keys, 0o600); err != nil {
			t.Fatal(err)
		}
		hooked := runMutate(t, bin, "CreatePhysical", "../../examples/pod.yaml", "-o", "yaml", "--undo-key-file", keyFile)
		file := filepath.Join(t.TempDir(), "hooked-pod.yaml")
		if err := os.WriteFile(file, []byte(hooked), 0o600); err != nil {
			t.Fatal(err)
		}
		patch, result := parseMutateOutput(t, runMutate(t, bin, "GetPhysical", file, "--undo-key-file", keyFile))
		wantOp(t, patch, jsonOp{Op: "remove", Path: "/metadata/labels/example.com~1tenant"})
		wantPodBack(t, "GetPhysical of the hooked pod", result)
	})

	t.Run("the tenant comes from the config's settings key, decoded strictly (plugin.UnmarshalConfig)", func(t *testing.T) {
		run := func(config string) (string, string, error) {
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(t.Context(), bin, "mutate", "--type", "CreatePhysical", "-f", "../../examples/pod.yaml", "-o", "yaml")
			cmd.Env = append(cleanEnv(), "SYNCHOOK_CONFIG="+config)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			return stdout.String(), stderr.String(), err
		}
		out, errOut, err := run("settings: {tenant: team-b}")
		if err != nil {
			t.Fatalf("mutate: %v\n%s", err, errOut)
		}
		var pod corev1.Pod
		if err := yaml.Unmarshal([]byte(out), &pod); err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"app": "web", TenantLabel: "team-b"}; !maps.Equal(pod.Labels, want) {
			t.Errorf("labels %v, want %v", pod.Labels, want)
		}
		_, errOut, err = run("settings: {tennant: team-b}")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(errOut, `settings: unknown field "tennant" (valid: tenant)`) {
			t.Errorf("a misspelt setting: %v, stderr %q; want exit 2 naming the key", err, errOut)
		}
	})

	t.Run("serve mutates a pod through the admission endpoint and the v1 bridge and stops on SIGTERM", func(t *testing.T) {
		// One listener each; the vcluster address is free and nobody listens there, so the
		// bridge keeps retrying its registration while it serves Mutate.
		ports := freeAddrs(t, 4)
		bindAddr, probeAddr, pluginAddr, vclusterAddr := ports[0], ports[1], ports[2], ports[3]
		certDir := filepath.Join(t.TempDir(), "certs")
		srv := startServe(t, bin,
			"--bind-address", bindAddr,
			"--health-probe-bind-address", probeAddr,
			"--metrics-bind-address", "0",
			"--cert-dir", certDir,
			"--plugin-address", pluginAddr,
			"--vcluster-address", vclusterAddr,
		)
		_, port, _ := net.SplitHostPort(bindAddr)
		base := "https://localhost:" + port
		httpsClient := waitReady(t, srv, certDir, probeAddr, base)

		t.Run("the admission endpoint answers an AdmissionReview of a pod with a JSON Patch adding the tenant label", func(t *testing.T) {
			podJSON := mustJSON(t, newPod())
			uid := types.UID("7d0c6d8e-5b0a-4f5e-9c43-3f1b2a0e9d11")
			review := admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{
					UID:       uid,
					Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
					Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
					Namespace: "vcluster-my-vcluster",
					Name:      "web-x-default-x-my-vcluster",
					Operation: admissionv1.Create,
					Object:    runtime.RawExtension{Raw: podJSON},
				},
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mutate/CreatePhysical", bytes.NewReader(mustJSON(t, review)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := httpsClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("POST /mutate/CreatePhysical: HTTP %d", res.StatusCode)
			}
			var answer admissionv1.AdmissionReview
			if err := json.NewDecoder(res.Body).Decode(&answer); err != nil {
				t.Fatalf("decode the AdmissionReview answer: %v", err)
			}
			if answer.APIVersion != "admission.k8s.io/v1" || answer.Kind != "AdmissionReview" {
				t.Errorf("answer is %s %s, want admission.k8s.io/v1 AdmissionReview", answer.APIVersion, answer.Kind)
			}
			r := answer.Response
			if r == nil {
				t.Fatal("the AdmissionReview has no response")
			}
			if r.UID != uid || !r.Allowed {
				t.Fatalf("response uid %q allowed %v (result %v), want uid %q allowed", r.UID, r.Allowed, r.Result, uid)
			}
			if r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("patchType %v, want JSONPatch", r.PatchType)
			}
			var ops []jsonOp
			if err := json.Unmarshal(r.Patch, &ops); err != nil {
				t.Fatalf("patch %s: %v", r.Patch, err)
			}
			wantOp(t, ops, jsonOp{Op: "add", Path: "/metadata/labels/example.com~1tenant", Value: tenant})

			// The patch applied to the request object, as the API server does, labels the pod.
			p, err := jsonpatch.DecodePatch(r.Patch)
			if err != nil {
				t.Fatalf("patch %s: %v", r.Patch, err)
			}
			patched, err := p.Apply(podJSON)
			if err != nil {
				t.Fatalf("apply patch %s: %v", r.Patch, err)
			}
			var got corev1.Pod
			if err := json.Unmarshal(patched, &got); err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"app": "web", TenantLabel: tenant}; !maps.Equal(got.Labels, want) {
				t.Errorf("labels after the patch %v, want %v", got.Labels, want)
			}
		})

		t.Run("the v1 bridge answers Mutate with vcluster absent and the answer decoded into the sent pod has the right labels", func(t *testing.T) {
			conn, err := grpc.NewClient(pluginAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			pc := remote.NewPluginClient(conn)
			mutate := func(t *testing.T, hookType string, pod *corev1.Pod) {
				t.Helper()
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				// The bridge's listener starts beside the HTTPS one: wait for it, don't race it.
				res, err := pc.Mutate(ctx, &remote.MutateRequest{
					ApiVersion: "v1", Kind: "Pod", Type: hookType, Object: string(mustJSON(t, pod)),
				}, grpc.WaitForReady(true))
				if err != nil {
					t.Fatalf("Mutate %s: %v", hookType, err)
				}
				if !res.GetMutated() {
					t.Fatalf("Mutate %s: mutated=false, want true", hookType)
				}
				// What vcluster does with the answer: decode it INTO the object it sent.
				if err := json.Unmarshal([]byte(res.GetObject()), pod); err != nil {
					t.Fatalf("decode the answer %s into the sent pod: %v", res.GetObject(), err)
				}
			}

			pod := newPod()
			mutate(t, "CreatePhysical", pod)
			if want := map[string]string{"app": "web", TenantLabel: tenant}; !maps.Equal(pod.Labels, want) {
				t.Errorf("CreatePhysical: labels %v, want %v", pod.Labels, want)
			}

			// The hooked pod, synchook.io/undo included, read back: automatic undo gives the
			// syncer the pod it sent, decoded into the hooked one as vcluster does.
			mutate(t, "GetPhysical", pod)
			wantPodBack(t, "GetPhysical of the hooked pod", pod)
		})

		// The bridge reports the absent vcluster on its first failed registration: wait for
		// it before stopping serve, which would otherwise end the attempt unreported.
		const unreachable = "vcluster plugin server not reachable, retrying"
		ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
		defer cancel()
		if err := poll(ctx, srv, func() error {
			if !strings.Contains(srv.stderr.String(), unreachable) {
				return fmt.Errorf("no %q in the output", unreachable)
			}
			return nil
		}); err != nil {
			t.Fatalf("the bridge did not report the absent vcluster at %s: %v", vclusterAddr, err)
		}
		if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
		select {
		case <-srv.done:
		case <-time.After(startTimeout):
			t.Fatalf("serve still running %s after SIGTERM; stderr:\n%s", startTimeout, srv.stderr)
		}
		if srv.err != nil {
			t.Errorf("serve after SIGTERM: %v, want exit code 0", srv.err)
		}
	})

	t.Run("started by go-plugin as a vcluster plugin v2 it announces its hooks and mutates pods", func(t *testing.T) {
		var stderr syncBuffer
		// As vcluster v0.36's plugin manager starts it: no arguments, its own environment in
		// cmd.Env with SkipHostEnv (go-plugin adds VCLUSTER_PLUGIN=vcluster and its port range).
		// No Initialize brings a host to keep the undo key in: the key comes from a file, as
		// SYNCHOOK_UNDO_KEY_FILE gives it (without a key a hooked write is refused).
		keys, err := exec.Command(bin, "undo-key").Output()
		if err != nil {
			t.Fatalf("undo-key: %v", err)
		}
		keyFile := filepath.Join(t.TempDir(), "keys")
		if err := os.WriteFile(keyFile, keys, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin)
		cmd.Env = append(cleanEnv(), "SYNCHOOK_UNDO_KEY_FILE="+keyFile)
		client := goplugin.NewClient(&goplugin.ClientConfig{
			HandshakeConfig:  bridgev2.Handshake,
			Plugins:          goplugin.PluginSet{bridgev2.PluginName: bridgev2.ClientPlugin()},
			Cmd:              cmd,
			SkipHostEnv:      true,
			AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
			StartTimeout:     startTimeout,
			Stderr:           &stderr,
			Logger:           hclog.New(&hclog.LoggerOptions{Name: "go-plugin", Output: &stderr, Level: hclog.Debug}),
		})
		t.Cleanup(func() {
			client.Kill()
			if !client.Exited() {
				t.Errorf("the plugin process is still running after Kill")
			}
			if t.Failed() {
				t.Logf("plugin stderr and go-plugin log:\n%s", stderr.String())
			}
		})
		rpc, err := client.Client()
		if err != nil {
			t.Fatalf("start the plugin: %v", err)
		}
		raw, err := rpc.Dispense(bridgev2.PluginName)
		if err != nil {
			t.Fatalf("dispense %q: %v", bridgev2.PluginName, err)
		}
		pc, ok := raw.(pluginv2.PluginClient)
		if !ok {
			t.Fatalf("dispensed %T, want pluginv2.PluginClient", raw)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		if _, err := pc.Initialize(ctx, &pluginv2.Initialize_Request{Config: `{"workingDir":"/plugins/pod-hook"}`}); err != nil {
			t.Fatalf("Initialize: %v", err)
		}

		cfgRes, err := pc.GetPluginConfig(ctx, &pluginv2.GetPluginConfig_Request{})
		if err != nil {
			t.Fatalf("GetPluginConfig: %v", err)
		}
		var cfg struct {
			ClientHooks []struct {
				APIVersion string   `json:"apiVersion"`
				Kind       string   `json:"kind"`
				Types      []string `json:"types"`
			} `json:"clientHooks"`
		}
		if err := json.Unmarshal([]byte(cfgRes.GetConfig()), &cfg); err != nil {
			t.Fatalf("plugin config %s: %v", cfgRes.GetConfig(), err)
		}
		// GetPhysical is announced although the example has no Get hook: automatic undo runs on it.
		found := false
		for _, h := range cfg.ClientHooks {
			if h.APIVersion == "v1" && h.Kind == "Pod" {
				found = slices.Contains(h.Types, "CreatePhysical") && slices.Contains(h.Types, "GetPhysical")
			}
		}
		if !found {
			t.Errorf("plugin config %s does not list v1 Pod with CreatePhysical and GetPhysical", cfgRes.GetConfig())
		}

		mutate := func(t *testing.T, hookType string, pod *corev1.Pod) {
			t.Helper()
			res, err := pc.Mutate(ctx, &pluginv2.Mutate_Request{
				ApiVersion: "v1", Kind: "Pod", Type: hookType, Object: string(mustJSON(t, pod)),
			})
			if err != nil {
				t.Fatalf("Mutate %s: %v", hookType, err)
			}
			if !res.GetMutated() {
				t.Fatalf("Mutate %s: mutated=false, want true", hookType)
			}
			if err := json.Unmarshal([]byte(res.GetObject()), pod); err != nil {
				t.Fatalf("decode the answer %s into the sent pod: %v", res.GetObject(), err)
			}
		}
		pod := newPod()
		mutate(t, "CreatePhysical", pod)
		if want := map[string]string{"app": "web", TenantLabel: tenant}; !maps.Equal(pod.Labels, want) {
			t.Errorf("CreatePhysical: labels %v, want %v", pod.Labels, want)
		}
		mutate(t, "GetPhysical", pod)
		wantPodBack(t, "GetPhysical of the hooked pod", pod)
	})
}

// buildExample builds this module's main package into a temporary directory, as a hook author
// would, and returns the binary's path.
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pod-hook")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "examples", "pod-hook")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -o %s .: %v\n%s", bin, err, out)
	}
	return bin
}

// cleanEnv is the test's environment without the variables that would change what the binary
// does (another config, a plugin v2 start, a bridge address).
func cleanEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "SYNCHOOK_CONFIG", "PLUGIN_CONFIG", "VCLUSTER_PLUGIN", "VCLUSTER_PLUGIN_ADDRESS", "VCLUSTER_PLUGIN_NAME":
			return true
		}
		return false
	})
}

// runMutate runs `bin mutate --type hookType -f file args…`, wants exit code 0 and returns stdout.
func runMutate(t *testing.T, bin, hookType, file string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"mutate", "--type", hookType, "-f", file}, args...)...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// jsonOp is one RFC 6902 operation.
type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func wantOp(t *testing.T, ops []jsonOp, want jsonOp) {
	t.Helper()
	// reflect.DeepEqual, as a value may be an object (not comparable with ==).
	if !slices.ContainsFunc(ops, func(op jsonOp) bool { return reflect.DeepEqual(op, want) }) {
		t.Errorf("patch %v has no operation %v", ops, want)
	}
}

// parseMutateOutput splits the output of mutate, "# JSON Patch (…)\n<patch>\n---\n# Result\n<YAML>",
// into the patch and the resulting pod.
func parseMutateOutput(t *testing.T, out string) ([]jsonOp, *corev1.Pod) {
	t.Helper()
	head, result, ok := strings.Cut(out, "\n---\n")
	if !ok {
		t.Fatalf("mutate output has no --- separator:\n%s", out)
	}
	header, patchText, ok := strings.Cut(head, "\n")
	if !ok || !strings.HasPrefix(header, "# JSON Patch") {
		t.Fatalf("mutate output does not start with the JSON Patch:\n%s", out)
	}
	var ops []jsonOp
	if err := json.Unmarshal([]byte(patchText), &ops); err != nil {
		t.Fatalf("patch %q: %v", patchText, err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(result), &pod); err != nil {
		t.Fatalf("result %q: %v", result, err)
	}
	if pod.Name != "web-x-default-x-my-vcluster" || len(pod.Spec.Containers) != 1 {
		t.Errorf("the result is not the whole pod:\n%s", result)
	}
	return ops, &pod
}

// wantPodBack fails the test unless pod is the pod of examples/pod.yaml (newPod) again: no
// tenant label, no label of the default config and no synchook.io/undo annotation.
func wantPodBack(t *testing.T, what string, pod *corev1.Pod) {
	t.Helper()
	// Semantic: nil and empty maps are equal (the decoded pod may keep an empty map).
	if want := newPod(); !equality.Semantic.DeepEqual(pod, want) {
		t.Errorf("%s: labels %v annotations %v, want the pod sent (labels %v, no annotations); whole pod %+v",
			what, pod.Labels, pod.Annotations, want.Labels, pod)
	}
}

// newPod is the pod of examples/pod.yaml.
func newPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-x-default-x-my-vcluster", Namespace: "vcluster-my-vcluster",
			Labels: map[string]string{"app": "web"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		}}},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// freeAddrs returns n distinct free 127.0.0.1 addresses: all are listened on at once, then closed.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// server is a running `serve` process.
type server struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited; err is then its Wait error
	err    error
}

// startServe starts `bin serve args…` and makes sure it is gone at the end of the test.
func startServe(t *testing.T, bin string, args ...string) *server {
	t.Helper()
	s := &server{stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	s.cmd.Env = cleanEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.stderr, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("serve output:\n%s", s.stderr.String())
		}
	})
	return s
}

// waitReady waits until serve has written its CA to certDir, its probe listener answers /readyz
// and its HTTPS listener answers /readyz with a certificate of that CA; it returns an HTTPS
// client trusting the CA.
func waitReady(t *testing.T, s *server, certDir, probeAddr, base string) *http.Client {
	t.Helper()
	var client *http.Client
	steps := []struct {
		what string
		fn   func() error
	}{
		{certDir + "/ca.crt", func() error {
			pem, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
			if err != nil {
				return err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return errors.New("no certificate in ca.crt yet")
			}
			client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			}}
			return nil
		}},
		{"http://" + probeAddr + "/readyz", func() error {
			return getOK(&http.Client{Timeout: 5 * time.Second}, "http://"+probeAddr+"/readyz")
		}},
		{base + "/readyz", func() error { return getOK(client, base+"/readyz") }},
	}
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	for _, step := range steps {
		if err := poll(ctx, s, step.fn); err != nil {
			t.Fatalf("%s not ready: %v", step.what, err)
		}
	}
	return client
}

// poll calls cond every 100 ms until it returns nil; it fails when ctx ends or serve exits
// first.
func poll(ctx context.Context, s *server, cond func() error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			exit := s.err
			if exit == nil {
				exit = errors.New("exit code 0")
			}
			return fmt.Errorf("serve exited early (%w); output:\n%s", exit, s.stderr)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func getOK(c *http.Client, url string) error {
	res, err := c.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, res.StatusCode)
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a process's output copiers.
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
