package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

// The config the sidecar runs with: labels on pods and services, a label on secrets.
const e2eConfig = `
hooks:
  - name: pod-labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels:
      labels: {vcluster.example.com/tenant: team-a}
      annotations: {synchook.io/owner: platform}
  - name: team-from-namespace
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels:
      fromNamespace: {keys: [team]}
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
`

// secretValue must never appear in a log line.
const secretValue = "s3cr3t-Pa55w0rd-\x00\xff-never-logged"

// refuseHook refuses pods labelled deny=true, like a policy hook would.
type refuseHook struct{}

func (refuseHook) Name() string            { return "refuse-denied" }
func (refuseHook) Resource() client.Object { return &corev1.Pod{} }
func (refuseHook) MutateCreatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	if obj.GetLabels()["deny"] == "true" {
		return nil, errors.New("pods labelled deny=true may not be synced")
	}
	return obj, nil
}

func TestAdmissionOnARealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()

	// The sidecar: config hooks + a Go hook, its own CA, HTTPS on a free loopback port.
	cfg, err := config.Parse([]byte(e2eConfig))
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry(nil)
	if err := cfg.Build(reg); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(refuseHook{})
	ca, err := certs.New(certs.Options{Dir: filepath.Join(t.TempDir(), "certs")})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Ensure(); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogSink
	port := testenv.FreePort(t)
	nsCache := namespaces.NewCache() // as serve makes it: the apiserver's Namespaces, for team-from-namespace
	nsCache.Configure(env.Config)
	t.Cleanup(nsCache.Close)
	srv, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{
		BindAddress: fmt.Sprintf("127.0.0.1:%d", port), ProbeBindAddress: "0",
		CertFile: ca.CertFile(), KeyFile: ca.KeyFile(), Log: logs.Logger(), Namespaces: nsCache,
	})
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stopServer := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Start(srvCtx) }()
	t.Cleanup(func() {
		stopServer()
		if err := <-served; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	caPEM, err := os.ReadFile(ca.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	waitHTTPS(t, fmt.Sprintf("https://127.0.0.1:%d/readyz", port))

	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Register the sidecar with the apiserver, as a MutatingWebhookConfiguration for CREATE of
	// pods, services, secrets and configmaps (configmaps have no hooks).
	url := fmt.Sprintf("https://127.0.0.1:%d/mutate/CreatePhysical", port)
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "synchook"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "create-physical.synchook.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"synchook-e2e": "true"}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods", "services", "secrets", "configmaps"},
				},
			}},
		}},
	}
	if err := c.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: map[string]string{"synchook-e2e": "true", "team": "payments"}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	waitForWebhook(t, c)

	t.Run("a pod arrives with the configured labels and annotations", func(t *testing.T) {
		pod := newPod("web", map[string]string{"app": "web"})
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		var got corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
			t.Fatal(err)
		}
		if got.Labels["vcluster.example.com/tenant"] != "team-a" || got.Labels["app"] != "web" || got.Annotations["synchook.io/owner"] != "platform" ||
			got.Labels["team"] != "payments" { // fromNamespace, from the apiserver's own Namespace
			t.Errorf("labels %v annotations %v", got.Labels, got.Annotations)
		}
	})

	t.Run("a service arrives with the configured label", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		if err := c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		var got corev1.Service
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), &got); err != nil {
			t.Fatal(err)
		}
		if got.Labels["vcluster.example.com/tenant"] != "team-a" {
			t.Errorf("labels %v", got.Labels)
		}
	})

	t.Run("a secret's data arrives byte-identical and is never logged", func(t *testing.T) {
		data := map[string][]byte{"password": []byte(secretValue), "binary": {0, 1, 2, 0xfe, 0xff}}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "tenant"}, Data: data}
		if err := c.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		var got corev1.Secret
		if err := c.Get(ctx, client.ObjectKeyFromObject(secret), &got); err != nil {
			t.Fatal(err)
		}
		if got.Labels["vcluster.example.com/synced"] != "true" {
			t.Errorf("labels %v", got.Labels)
		}
		for k, v := range data {
			if string(got.Data[k]) != string(v) {
				t.Errorf("data[%s] = %q, want %q", k, got.Data[k], v)
			}
		}
		if strings.Contains(logs.String(), "s3cr3t") {
			t.Errorf("secret data appears in the logs")
		}
	})

	t.Run("an object no hook matches gets no patch", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "tenant", Labels: map[string]string{"keep": "me"}}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		var got corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Labels) != 1 || len(got.Annotations) != 0 {
			t.Errorf("labels %v annotations %v, want them untouched", got.Labels, got.Annotations)
		}
		if !hasLogLine(logs.Lines(), `"gvk"="/v1, Kind=ConfigMap"`, `"name"="settings"`, `"patchOperations"=0`) {
			t.Errorf("no log line shows the configmap request with 0 patch operations:\n%s", logs.String())
		}
	})

	t.Run("a hook error makes the apiserver reject the create with the hook's message", func(t *testing.T) {
		err := c.Create(ctx, newPod("denied", map[string]string{"deny": "true"}))
		if err == nil {
			t.Fatal("the apiserver created a pod that a hook refused")
		}
		if !strings.Contains(err.Error(), `hook "refuse-denied" CreatePhysical Pod: pods labelled deny=true may not be synced`) {
			t.Errorf("error = %v", err)
		}
		var got corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "denied"}, &got); err == nil {
			t.Errorf("refused pod exists")
		}
	})

	t.Run("a pod created right after its namespace gets the namespace's labels", func(t *testing.T) {
		// The namespace cache may not have the new namespace when the pod's request comes: it
		// waits for its watch or reads the namespace directly, never labels the pod without it.
		fresh := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Labels: map[string]string{"synchook-e2e": "true", "team": "search"}}}
		if err := c.Create(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		pod := newPod("fresh", nil)
		pod.Namespace = fresh.Name
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if pod.Labels["team"] != "search" {
			t.Errorf("labels %v, want team=search from namespace fresh", pod.Labels)
		}
	})

	t.Run("the namespace cache says a namespace the apiserver does not have is not found, naming it", func(t *testing.T) {
		_, _, err := namespaces.Source{Lookup: nsCache}.Namespace(ctx, hooks.CreatePhysical, "never-created", nil)
		if !errors.Is(err, namespaces.ErrNotFound) || !strings.Contains(err.Error(), `namespace "never-created"`) {
			t.Errorf("error %v, want ErrNotFound naming namespace never-created", err)
		}
	})
}

func newPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

// waitHTTPS waits until url answers 200 over TLS (certificate not verified: this only waits for
// the listener).
func waitHTTPS(t *testing.T, url string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // readiness poll only
	testenv.Eventually(t, 30*time.Second, url+" ready", func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	})
}

// waitForWebhook waits until the apiserver calls the webhook (its configuration is loaded
// asynchronously): it creates probe pods until one shows up with the sidecar's label.
func waitForWebhook(t *testing.T, c client.Client) {
	t.Helper()
	i := 0
	testenv.Eventually(t, 30*time.Second, "the apiserver calling the webhook", func() error {
		pod := newPod(fmt.Sprintf("probe-%d", i), nil)
		i++
		if err := c.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		_ = c.Delete(t.Context(), pod)
		if pod.Labels["vcluster.example.com/tenant"] != "team-a" {
			return errors.New("a probe pod came back without the hook's label")
		}
		return nil
	})
}

func hasLogLine(lines []string, parts ...string) bool {
	for _, l := range lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
