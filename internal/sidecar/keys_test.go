package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
	"github.com/synchook/synchook/patch"
	"github.com/synchook/synchook/webhook"
)

// noNamespaceFile is a service-account namespace file that does not exist: not in a pod, even
// where the tests run in one.
func noNamespaceFile(t *testing.T) string {
	return filepath.Join(t.TempDir(), "no-namespace")
}

// localOpts are Serve's options on free ports with certDir, no metrics or probe listener and
// no namespace: the key comes from certDir unless the test sets another source.
func localOpts(t *testing.T, certDir string) sidecar.Options {
	return sidecar.Options{
		Getenv:                      noEnv,
		CertDir:                     certDir,
		MetricsBindAddress:          "0",
		ServiceAccountNamespaceFile: noNamespaceFile(t),
		Webhook:                     webhook.Options{BindAddress: freeAddr(t), ProbeBindAddress: "0"},
	}
}

// review sends the pod JSON to the server's hookType endpoint and returns the pod with the
// answered patch applied.
func review(t *testing.T, hc *http.Client, addr, hookType string, pod []byte) []byte {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "tenant", Name: "web",
			Operation: admissionv1.Create,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	_ = json.Unmarshal(body, &raw)
	raw["request"].(map[string]any)["object"] = json.RawMessage(pod)
	body, _ = json.Marshal(raw)
	resp, err := hc.Post("https://"+addr+"/mutate/"+hookType, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("%s: HTTP %d, decode: %v", hookType, resp.StatusCode, err)
	}
	if !out.Response.Allowed {
		t.Fatalf("%s refused: %+v", hookType, out.Response.Result)
	}
	if len(out.Response.Patch) == 0 {
		return pod
	}
	got, err := patch.Apply(pod, out.Response.Patch)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

const plainPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"tenant","labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`

// hooked runs CreatePhysical on plainPod and checks that the result carries the label and a
// sealed undo.
func hooked(t *testing.T, hc *http.Client, addr string) []byte {
	t.Helper()
	obj := review(t, hc, addr, "CreatePhysical", []byte(plainPod))
	var pod corev1.Pod
	if err := json.Unmarshal(obj, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels[hookedLabel] != "true" || !undo.IsSealed(pod.Annotations["synchook.io/undo"]) {
		t.Fatalf("CreatePhysical gave labels %v, annotations %v; want %s and a sealed undo", pod.Labels, pod.Annotations, hookedLabel)
	}
	return obj
}

// readBack runs GetPhysical on obj and checks that the view is plainPod again: the undo opened.
func readBack(t *testing.T, hc *http.Client, addr string, obj []byte) {
	t.Helper()
	view := review(t, hc, addr, "GetPhysical", obj)
	var got, want corev1.Pod
	if err := json.Unmarshal(view, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(plainPod), &want)
	if len(got.Annotations) != 0 || !slices.Equal(mapKeys(got.Labels), mapKeys(want.Labels)) {
		t.Errorf("GetPhysical view has labels %v, annotations %v; want the pod as created (the undo did not open)", got.Labels, got.Annotations)
	}
}

func mapKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestServeMakesItsLocalKeyFileOnceAndReusesIt is `make run` twice: outside a cluster and
// without --undo-key-file, serve creates undo.keys (0600) beside its certificates, and the
// next start reuses it, so what the first sealed the second opens.
func TestServeMakesItsLocalKeyFileOnceAndReusesIt(t *testing.T) {
	certDir := filepath.Join(t.TempDir(), "certs")
	keyFile := filepath.Join(certDir, undokey.LocalFileName)

	first := startServe(t, localOpts(t, certDir))
	hc := first.waitReady(t)
	info, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("no key file beside the certificates: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", keyFile, info.Mode().Perm())
	}
	ring, err := undokey.LoadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.logs.WaitFor(t.Context(), "created a key file", ring.IDs()[0]); err != nil {
		t.Error(err)
	}
	obj := hooked(t, hc, first.opts.Webhook.BindAddress)
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	text, _ := ring.MarshalText()
	for _, line := range strings.Split(string(text), "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.Contains(first.logs.String(), f[1]) {
			t.Error("the log holds the key's secret")
		}
	}

	second := startServe(t, localOpts(t, certDir))
	hc = second.waitReady(t)
	if _, err := second.logs.WaitFor(t.Context(), "from the key file beside the certificates", ring.IDs()[0]); err != nil {
		t.Error(err)
	}
	readBack(t, hc, second.opts.Webhook.BindAddress, obj)
	again, err := undokey.LoadFile(keyFile)
	if err != nil || !again.Contains(ring) || !ring.Contains(again) {
		t.Errorf("the key file changed at the second start: %v, %v", again, err)
	}
}

// TestServeRefusesALocalKeyDirThatIsNotItsOwn: a cert dir that group or others may write is no
// place for a key; serve stops before it listens and says to give --undo-key-file.
func TestServeRefusesALocalKeyDirThatIsNotItsOwn(t *testing.T) {
	certDir := t.TempDir()
	if err := os.Chmod(certDir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(certDir, 0o700) })
	opts := localOpts(t, certDir)
	opts.Webhook.BindAddress = holdAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := sidecar.Serve(ctx, opts)
	if !errors.Is(err, sidecar.ErrConfig) || !strings.Contains(err.Error(), certDir) || !strings.Contains(err.Error(), "mode 0777") || !strings.Contains(err.Error(), "--undo-key-file") {
		t.Errorf("Serve = %v; want ErrConfig naming %s, its mode and --undo-key-file", err, certDir)
	}
	if _, err := os.Stat(filepath.Join(certDir, undokey.LocalFileName)); err == nil {
		t.Error("a key file was written in a directory others may write")
	}
}

// TestTwoServesWithOneKeyFileOpenEachOthersUndos: replicas given the same --undo-key-file
// (a mounted Secret) read back what any of them wrote.
func TestTwoServesWithOneKeyFileOpenEachOthersUndos(t *testing.T) {
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	text, _ := ring.MarshalText()
	keyFile := writeFile(t, "keys", string(text))
	var servers []*serving
	for range 2 {
		opts := localOpts(t, filepath.Join(t.TempDir(), "certs"))
		opts.UndoKeyFile = keyFile
		servers = append(servers, startServe(t, opts))
	}
	a, b := servers[0], servers[1]
	hcA, hcB := a.waitReady(t), b.waitReady(t)
	for _, s := range servers {
		if _, err := s.logs.WaitFor(t.Context(), "undo key from a file", ring.IDs()[0]); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(s.opts.CertDir, undokey.LocalFileName)); err == nil {
			t.Error("a local key file was made although --undo-key-file was given")
		}
	}
	readBack(t, hcB, b.opts.Webhook.BindAddress, hooked(t, hcA, a.opts.Webhook.BindAddress))
	readBack(t, hcA, a.opts.Webhook.BindAddress, hooked(t, hcB, b.opts.Webhook.BindAddress))
}

// TestServeInAClusterKeepsItsKeyInTheSecret runs serve against a real apiserver: with a
// namespace (the flag, or the pod's namespace file) the key lives in the undo key Secret, a
// second start reuses its ring, and without RBAC on secrets serve does not start (and says
// what it needs) instead of falling back to a local key.
func TestServeInAClusterKeepsItsKeyInTheSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("starts envtest")
	}
	env := testenv.Start(t)
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "serve-keys-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	admin := func() (*rest.Config, error) { return env.Config, nil }

	certDir := filepath.Join(t.TempDir(), "certs")
	opts := localOpts(t, certDir)
	opts.UndoKeyNamespace, opts.RESTConfig = ns.Name, admin
	first := startServe(t, opts)
	hc := first.waitReady(t)
	stored := func() *undo.Ring {
		t.Helper()
		sec := &corev1.Secret{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns.Name, Name: undokey.DefaultSecretName}, sec); err != nil {
			t.Fatalf("the undo key Secret: %v", err)
		}
		r, err := undo.ParseRing(sec.Data[undokey.KeysItem])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ring := stored()
	if _, err := first.logs.WaitFor(t.Context(), "undo key from the key Secret", ring.IDs()[0]); err != nil {
		t.Error(err)
	}
	obj := hooked(t, hc, first.opts.Webhook.BindAddress)
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(certDir, undokey.LocalFileName)); err == nil {
		t.Error("a local key file was made in a cluster")
	}

	t.Run("a second start in the pod's namespace reuses the ring", func(t *testing.T) {
		opts := localOpts(t, filepath.Join(t.TempDir(), "certs"))
		opts.ServiceAccountNamespaceFile = writeFile(t, "namespace", ns.Name)
		opts.RESTConfig = admin
		second := startServe(t, opts)
		hc := second.waitReady(t)
		if _, err := second.logs.WaitFor(t.Context(), "undo key from the key Secret", ring.IDs()[0]); err != nil {
			t.Error(err)
		}
		readBack(t, hc, second.opts.Webhook.BindAddress, obj)
		if now := stored(); !now.Contains(ring) || !ring.Contains(now) {
			t.Errorf("the Secret's ring changed: %v, was %v", now, ring)
		}
	})

	t.Run("without RBAC on secrets serve does not start", func(t *testing.T) {
		user, err := env.AddUser(envtest.User{Name: "synchook-no-secrets"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "serve-keys-"}}
		if err := c.Create(t.Context(), other); err != nil {
			t.Fatal(err)
		}
		opts := localOpts(t, filepath.Join(t.TempDir(), "certs"))
		opts.UndoKeyNamespace = other.Name
		opts.RESTConfig = func() (*rest.Config, error) { return user.Config(), nil }
		opts.Webhook.BindAddress = holdAddr(t)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err = sidecar.Serve(ctx, opts)
		if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "get, create and update on secrets in namespace "+other.Name) {
			t.Errorf("Serve = %v; want an error naming the RBAC it needs", err)
		}
		if _, err := os.Stat(filepath.Join(opts.CertDir, undokey.LocalFileName)); err == nil {
			t.Error("fell back to a local key file in a cluster")
		}

		// The Role the docs give is enough.
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: other.Name, Name: "synchook-undo-key"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update"}}},
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: other.Name, Name: "synchook-undo-key"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "synchook-no-secrets"}},
		}
		for _, o := range []client.Object{role, binding} {
			if err := c.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
		// The apiserver's authorizer sees a new RoleBinding through its informer: wait until the
		// user may read the (absent) Secret before starting.
		uc, err := client.New(user.Config(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "the Role to take effect", func() error {
			err := uc.Get(t.Context(), client.ObjectKey{Namespace: other.Name, Name: "absent"}, &corev1.Secret{})
			if apierrors.IsForbidden(err) {
				return err
			}
			return nil
		})
		opts.Webhook.BindAddress = freeAddr(t)
		granted := startServe(t, opts)
		granted.waitReady(t)
		if _, err := granted.logs.WaitFor(t.Context(), "undo key from the key Secret"); err != nil {
			t.Error(err)
		}
	})
}
