package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/vclusterstub"
	"github.com/synchook/synchook/patch"
)

// bridgeConfig is the hook config the real binary runs with in the bridge tests: labels on the
// way down, strip on the way up.
const bridgeConfig = `
hooks:
  - name: pod-labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    labels:
      labels: {vcluster.example.com/tenant: team-a}
      annotations: {synchook.io/owner: platform}
  - name: service-labels
    resources: [{apiVersion: v1, kind: Service}]
    types: [CreatePhysical]
    labels:
      labels: {vcluster.example.com/tenant: team-a}
  - name: secret-labels
    resources: [{apiVersion: v1, kind: Secret}]
    types: [CreatePhysical]
    labels:
      labels: {vcluster.example.com/synced: "true"}
  - name: strip-host-fields
    resources: [{apiVersion: v1, kind: Pod}]
    types: [GetPhysical]
    strip:
      paths:
        - /metadata/labels/host.example.com~1pool
        - /metadata/annotations/host.example.com~1internal
        - /spec/nodeName
        - /status/hostIP
`

// sidecarProcess is `synchook serve` running as a subprocess.
type sidecarProcess struct {
	cmd                *exec.Cmd
	logs               *syncBuffer
	pluginPort         int
	webhookURL, caFile string
}

// TestBridgeWithTheRealBinary runs the real synchook binary the way the vcluster chart runs a
// legacy plugin sidecar (VCLUSTER_PLUGIN_ADDRESS, VCLUSTER_PLUGIN_NAME) against a stand-in for
// vcluster's plugin server that calls Mutate the way vcluster does.
func TestBridgeWithTheRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	vc := vclusterstub.Start(t, "127.0.0.1:0")
	sc := startSidecar(t, vc.Addr())
	ctx := t.Context()

	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	reg, err := vc.WaitForPlugin(waitCtx, "synchook-e2e")
	if err != nil {
		t.Fatalf("%v\nsidecar logs:\n%s", err, sc.logs)
	}

	t.Run("synchook registers its name, version v1, an IP address and the configured hooks", func(t *testing.T) {
		if reg.GetVersion() != "v1" {
			t.Errorf("version %q, want v1", reg.GetVersion())
		}
		if want := fmt.Sprintf("127.0.0.1:%d", sc.pluginPort); reg.GetAddress() != want {
			t.Errorf("address %q, want %q (the env said localhost)", reg.GetAddress(), want)
		}
		if got, want := clientHooks(reg), "v1/Pod=CreatePhysical,UpdatePhysical,GetPhysical v1/Service=CreatePhysical,GetPhysical v1/Secret=CreatePhysical,GetPhysical"; got != want {
			t.Errorf("client hooks %q, want %q", got, want)
		}
	})

	t.Run("pods, services and secrets come back with the configured labels", func(t *testing.T) {
		pod := bridgePod()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		data := map[string][]byte{"password": []byte(secretValue), "binary": {0, 1, 2, 0xfe, 0xff}}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "tenant"}, Data: data}
		for _, obj := range []client.Object{pod, svc, secret} {
			if _, err := vc.MutateObject(ctx, obj, "CreatePhysical"); err != nil {
				t.Fatal(err)
			}
		}
		if pod.Labels["vcluster.example.com/tenant"] != "team-a" || pod.Labels["app"] != "web" || pod.Annotations["synchook.io/owner"] != "platform" {
			t.Errorf("pod labels %v annotations %v", pod.Labels, pod.Annotations)
		}
		if svc.Labels["vcluster.example.com/tenant"] != "team-a" {
			t.Errorf("service labels %v", svc.Labels)
		}
		if secret.Labels["vcluster.example.com/synced"] != "true" {
			t.Errorf("secret labels %v", secret.Labels)
		}
		for k, v := range data {
			if !bytes.Equal(secret.Data[k], v) {
				t.Errorf("secret data[%s] = %q, want %q", k, secret.Data[k], v)
			}
		}
	})

	t.Run("a kind or a hook type without hooks comes back unchanged", func(t *testing.T) {
		addr := reg.GetAddress()
		cm, _ := json.Marshal(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "tenant"}})
		pod, _ := json.Marshal(bridgePod())
		for _, req := range []*remote.MutateRequest{
			{ApiVersion: "v1", Kind: "ConfigMap", Type: "CreatePhysical", Object: string(cm)},
			{ApiVersion: "v1", Kind: "Pod", Type: "DeleteVirtual", Object: string(pod)},
			{ApiVersion: "v1", Kind: "Pod", Type: "ApplyPhysical", Object: string(pod)},
		} {
			res, err := vclusterstub.Mutate(ctx, addr, req)
			if err != nil || res.GetMutated() || res.GetObject() != "" {
				t.Errorf("%s %s: Mutate = %v, %v; want mutated=false and no object", req.GetKind(), req.GetType(), res, err)
			}
		}
	})

	t.Run("strip removes a label, an annotation and omitempty fields as vcluster decodes them", func(t *testing.T) {
		pod := bridgePod()
		pod.Labels["host.example.com/pool"] = "blue"
		pod.Annotations = map[string]string{"host.example.com/internal": "x", "keep": "me"}
		pod.Spec.NodeName, pod.Status.HostIP = "node-7", "10.0.0.7"
		if n, err := vc.MutateObject(ctx, pod, "GetPhysical"); err != nil || n != 1 {
			t.Fatalf("MutateObject = %d, %v", n, err)
		}
		if _, ok := pod.Labels["host.example.com/pool"]; ok {
			t.Errorf("label survived: %v", pod.Labels)
		}
		if _, ok := pod.Annotations["host.example.com/internal"]; ok || pod.Annotations["keep"] != "me" {
			t.Errorf("annotations %v, want only keep=me", pod.Annotations)
		}
		if pod.Spec.NodeName != "" || pod.Status.HostIP != "" {
			t.Errorf("nodeName %q hostIP %q survived", pod.Spec.NodeName, pod.Status.HostIP)
		}
		if pod.Labels["app"] != "web" || pod.Spec.Containers[0].Image != "nginx" {
			t.Errorf("untouched fields changed: %+v", pod)
		}
	})

	t.Run("the admission endpoint and the bridge give the same object for the same config", func(t *testing.T) {
		pod := bridgePod()
		pod.Labels["host.example.com/pool"] = "blue"
		request, _ := json.Marshal(pod)
		viaWebhook := admit(t, sc, request)

		viaBridge := bridgePod()
		viaBridge.Labels["host.example.com/pool"] = "blue"
		if _, err := vc.MutateObject(ctx, viaBridge, "CreatePhysical"); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(viaBridge)
		if !bytes.Equal(got, viaWebhook) {
			t.Errorf("objects differ:\n bridge  %s\n webhook %s", got, viaWebhook)
		}
	})

	t.Run("synchook registers again after vcluster restarts with a new run ID", func(t *testing.T) {
		before := vc.Registrations()
		oldRun := vc.RunID()
		vc.Restart(t)
		if vc.RunID() == oldRun {
			t.Fatal("the stand-in kept its run ID")
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		again, err := vc.WaitForPlugin(ctx, "synchook-e2e")
		if err != nil {
			t.Fatalf("%v\nsidecar logs:\n%s", err, sc.logs)
		}
		if clientHooks(again) != clientHooks(reg) || again.GetAddress() != reg.GetAddress() {
			t.Errorf("registration after restart %v, want %v", again, reg)
		}
		if vc.Registrations() != before+1 {
			t.Errorf("%d registrations, want %d", vc.Registrations(), before+1)
		}
		pod := bridgePod()
		if _, err := vc.MutateObject(ctx, pod, "CreatePhysical"); err != nil || pod.Labels["vcluster.example.com/tenant"] != "team-a" {
			t.Errorf("after the restart: %v, labels %v", err, pod.Labels)
		}
	})

	t.Run("SIGTERM stops the sidecar with exit code 0 and no object data in the logs", func(t *testing.T) {
		if err := sc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := sc.cmd.Wait(); err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, sc.logs)
		}
		logs := sc.logs.String()
		if !strings.Contains(logs, "registered with vcluster") {
			t.Errorf("no registration log line:\n%s", logs)
		}
		if strings.Contains(logs, "s3cr3t") {
			t.Errorf("secret data appears in the logs")
		}
	})
}

// startSidecar builds synchook and runs `synchook serve` with the vcluster chart's env, the
// bridge pointing at vclusterAddr, and the webhook on a free loopback port.
func startSidecar(t *testing.T, vclusterAddr string) *sidecarProcess {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "synchook")
	build := exec.Command("go", "build", "-o", bin, "github.com/synchook/synchook")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sc := &sidecarProcess{logs: &syncBuffer{}, pluginPort: testenv.FreePort(t)}
	webhookPort := testenv.FreePort(t)
	certDir := filepath.Join(dir, "certs")
	sc.webhookURL = fmt.Sprintf("https://127.0.0.1:%d/mutate/CreatePhysical", webhookPort)
	sc.caFile = filepath.Join(certDir, "ca.crt")
	sc.cmd = exec.Command(bin, "serve",
		"--vcluster-address", vclusterAddr,
		"--bind-address", fmt.Sprintf("127.0.0.1:%d", webhookPort),
		"--health-probe-bind-address", "0",
		"--metrics-bind-address", "0",
		"--cert-dir", certDir)
	sc.cmd.Env = append(os.Environ(),
		fmt.Sprintf("VCLUSTER_PLUGIN_ADDRESS=localhost:%d", sc.pluginPort),
		"VCLUSTER_PLUGIN_NAME=synchook-e2e",
		"SYNCHOOK_CONFIG="+bridgeConfig)
	sc.cmd.Stderr = sc.logs
	if err := sc.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sc.cmd.ProcessState == nil {
			_ = sc.cmd.Process.Kill()
			_ = sc.cmd.Wait()
		}
	})
	return sc
}

// syncBuffer is a bytes.Buffer safe for the process's writer and the test's readers.
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

// admit sends objectJSON (a pod) to the sidecar's /mutate/CreatePhysical as an AdmissionReview,
// applies the JSON Patch of the answer and returns the JSON of the resulting pod.
func admit(t *testing.T, sc *sidecarProcess, objectJSON []byte) []byte {
	t.Helper()
	caPEM, err := os.ReadFile(sc.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "5f1d6c1e-8f5b-4a5e-9c0f-2b3a4d5e6f70",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Name:      "web",
			Namespace: "tenant",
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: objectJSON},
		},
	}
	body, _ := json.Marshal(review)
	resp, err := hc.Post(sc.webhookURL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil || !out.Response.Allowed {
		t.Fatalf("admission answer %+v, %v", out.Response, err)
	}
	patched, err := patch.Apply(objectJSON, out.Response.Patch)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(patched, &pod); err != nil {
		t.Fatal(err)
	}
	canonical, _ := json.Marshal(&pod)
	return canonical
}

// bridgePod is a pod as vcluster holds it: typed, TypeMeta empty.
func bridgePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

// clientHooks renders a registration's client hooks as "apiVersion/Kind=Type,Type …".
func clientHooks(p *remote.RegisterPluginRequest) string {
	var out []string
	for _, h := range p.GetClientHooks() {
		out = append(out, fmt.Sprintf("%s/%s=%s", h.GetApiVersion(), h.GetKind(), strings.Join(h.GetTypes(), ",")))
	}
	return strings.Join(out, " ")
}
