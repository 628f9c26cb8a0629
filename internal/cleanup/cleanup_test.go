package cleanup_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/cleanup"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
	"github.com/synchook/synchook/patch"
	"github.com/synchook/synchook/plugin"
)

// secretValue is the value the strip hook took off the Secret: it must come back on the
// Secret and never appear in any output, in any encoding.
const secretValue = "s3cr3t-Pa55w0rd-never-printed"

// defaultTolerations are the tolerations a Pod synced from a vcluster already carries: the
// virtual cluster's apiserver added them (DefaultTolerationSeconds), so the host's adds none.
const defaultTolerations = `"tolerations":[
	{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},
	{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]`

var (
	podGVK       = corev1.SchemeGroupVersion.WithKind("Pod")
	secretGVK    = corev1.SchemeGroupVersion.WithKind("Secret")
	configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
)

// hookedRegistry is the synchook that wrote the host objects: sealed undo with ring, a labels
// hook and a Go hook adding a toleration on Pods, a strip hook taking a Secret's password.
func hookedRegistry(t *testing.T) (*engine.Registry, *undo.Ring) {
	t.Helper()
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
	write := []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}
	toleration := func(_ context.Context, o client.Object) (client.Object, error) {
		p := o.(*corev1.Pod)
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpExists})
		return p, nil
	}
	strip, err := builtin.StripFunc(builtin.Strip{Paths: []string{"/data/password"}})
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(
		hooks.NewFunc("labels", &corev1.Pod{}, write, builtin.LabelsFunc(builtin.Labels{Labels: map[string]string{"tenant": "a"}})),
		hooks.NewFunc("toleration", &corev1.Pod{}, write, toleration),
		hooks.NewFunc("strip", &corev1.Secret{}, write, strip),
	)
	return reg, ring
}

// createHooked runs reg's CreatePhysical chain on doc, as the syncer's create does, and
// creates the hooked object.
func createHooked(t *testing.T, c client.Client, reg *engine.Registry, gvk schema.GroupVersionKind, doc string) {
	t.Helper()
	res, err := reg.Mutate(t.Context(), gvk, hooks.CreatePhysical, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if res.Patch == nil {
		t.Fatalf("the hooks did not change %s", doc)
	}
	hooked, err := patch.Apply([]byte(doc), res.Patch)
	if err != nil {
		t.Fatal(err)
	}
	create(t, c, string(hooked))
}

// create creates the object doc.
func create(t *testing.T, c client.Client, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// createNamespace creates namespace ns.
func createNamespace(t *testing.T, c client.Client, ns string) {
	t.Helper()
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
}

// objects lists the objects of the default kinds in ns, by "Kind/name".
func objects(t *testing.T, c client.Client, ns string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, gvk := range cleanup.DefaultKinds() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			out[gvk.Kind+"/"+list.Items[i].GetName()] = &list.Items[i]
		}
	}
	return out
}

// resourceVersions returns the resourceVersion of every object of objects(ns).
func resourceVersions(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, o := range objects(t, c, ns) {
		out[k] = o.GetResourceVersion()
	}
	return out
}

// reservedAnnotations returns "Kind/name key" for every synchook.io/* annotation in ns.
func reservedAnnotations(t *testing.T, c client.Client, ns string) []string {
	t.Helper()
	var out []string
	for k, o := range objects(t, c, ns) {
		for a := range o.GetAnnotations() {
			if strings.HasPrefix(a, undo.ReservedPrefix) {
				out = append(out, k+" "+a)
			}
		}
	}
	return out
}

// runCLI runs `synchook cleanup args...` and returns its exit code and stdout+stderr.
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	p := plugin.New()
	p.Args = append([]string{"cleanup"}, args...)
	p.Stdin, p.Stdout, p.Stderr = strings.NewReader(""), &stdout, &stderr
	p.Getenv = func(string) string { return "" }
	code := 0
	if err := p.Start(); err != nil {
		var exit *plugin.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		code = exit.Code
	}
	return code, stdout.String() + stderr.String()
}

// checkNoSecret fails t when out holds secretValue, raw, in base64 or in hex.
func checkNoSecret(t *testing.T, what, out string) {
	t.Helper()
	for enc, v := range map[string]string{
		"raw":       secretValue,
		"base64":    base64.StdEncoding.EncodeToString([]byte(secretValue)),
		"base64url": base64.RawURLEncoding.EncodeToString([]byte(secretValue)),
		"hex":       hex.EncodeToString([]byte(secretValue)),
	} {
		if strings.Contains(out, v) {
			t.Errorf("%s holds the Secret value (%s):\n%s", what, enc, out)
		}
	}
}

func TestCleanupOnARealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	reg, ring := hookedRegistry(t)
	keys, err := ring.MarshalText()
	if err != nil {
		t.Fatal(err)
	}

	const ns = "vc-host"
	createNamespace(t, c, ns)
	// The managed key Secret, as synchook writes it.
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: undokey.DefaultSecretName, Namespace: ns},
		Data:       map[string][]byte{undokey.KeysItem: keys, undokey.KindsItem: []byte("v1/Pod physical\nv1/Secret physical\n")},
	}); err != nil {
		t.Fatal(err)
	}
	createHooked(t, c, reg, podGVK, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"vc-host","labels":{"app":"web"}},
		"spec":{"automountServiceAccountToken":false,"containers":[{"name":"c","image":"busybox"}],`+defaultTolerations+`}}`)
	createHooked(t, c, reg, secretGVK, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"vc-host"},
		"data":{"user":"`+base64.StdEncoding.EncodeToString([]byte("admin"))+`","password":"`+base64.StdEncoding.EncodeToString([]byte(secretValue))+`"}}`)
	// Forged undos: clear-text-looking garbage, and a sealed-looking value that does not open.
	create(t, c, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"forged-clear","namespace":"vc-host","labels":{"app":"forged"},
		"annotations":{"synchook.io/undo":"[{\"path\":\"/metadata/labels/app\",\"hooked\":","other":"kept"}},
		"spec":{"automountServiceAccountToken":false,"containers":[{"name":"c","image":"busybox"}]}}`)
	create(t, c, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"forged-sealed","namespace":"vc-host",
		"annotations":{"synchook.io/undo":"s1.`+ring.IDs()[0]+`.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
		"spec":{"automountServiceAccountToken":false,"containers":[{"name":"c","image":"busybox"}]}}`)
	// Provenance only, and an object synchook never touched.
	create(t, c, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"vc-host",
		"annotations":{"synchook.io/mutated-by":"labels@v1#00000000"}},"data":{"k":"v"}}`)
	create(t, c, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"plain","namespace":"vc-host","annotations":{"a":"b"}},
		"spec":{"automountServiceAccountToken":false,"containers":[{"name":"c","image":"busybox"}]}}`)

	stored := objects(t, c, ns)
	if _, has := stored["Secret/db"].Object["data"].(map[string]any)["password"]; has {
		t.Fatal("the strip hook did not take the password off the stored Secret")
	}
	before := resourceVersions(t, c, ns)
	var output strings.Builder // everything any run printed

	t.Run("a dry run reports and writes nothing", func(t *testing.T) {
		code, out := runCLI(t, "--kubeconfig", kubeconfig, "--namespace", ns, "--dry-run")
		output.WriteString(out)
		if code != 1 { // as the run: some changes are left
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		for _, want := range []string{"would clean", "v1/Pod vc-host/web", "v1/Secret vc-host/db", "5 to clean"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if after := resourceVersions(t, c, ns); !reflect.DeepEqual(after, before) {
			t.Errorf("resourceVersions changed by a dry run:\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("a run restores what it can and removes every synchook annotation", func(t *testing.T) {
		var progress bytes.Buffer
		sum, err := cleanup.Run(ctx, cleanup.Options{
			Client: c, Namespace: ns, Kinds: cleanup.Kinds([]undo.Kind{{GVK: podGVK, Side: undo.Physical}}), Ring: ring, Progress: &progress,
		})
		output.WriteString(progress.String() + sum.String())
		if err != nil {
			t.Fatal(err)
		}
		want := cleanup.Summary{Scanned: len(before), Cleaned: 5, Unchanged: len(before) - 5, UndosApplied: 2, Unrestored: 1, NotApplied: 2}
		if sum != want {
			t.Errorf("summary %+v, want %+v", sum, want)
		}
		if left := reservedAnnotations(t, c, ns); len(left) > 0 {
			t.Errorf("synchook annotations left: %v", left)
		}
		got := objects(t, c, ns)
		web := got["Pod/web"]
		if labels := web.GetLabels(); labels["tenant"] != "" || labels["app"] != "web" {
			t.Errorf("web's labels %v, want app=web only", labels)
		}
		var pod corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(web.Object, &pod); err != nil {
			t.Fatal(err)
		}
		if !hasToleration(pod.Spec.Tolerations, "tenant") {
			t.Errorf("web's toleration was removed, but an update cannot do that: %v", pod.Spec.Tolerations)
		}
		for _, line := range []string{
			`not restorable (an update cannot change it back): "/spec/tolerations`,
			"undo not applied (clear_text)",
			"undo not applied (unauthentic)",
		} {
			if !strings.Contains(progress.String(), line) {
				t.Errorf("progress lacks %q:\n%s", line, progress.String())
			}
		}
		data := got["Secret/db"].Object["data"].(map[string]any)
		if pw, _ := data["password"].(string); pw != base64.StdEncoding.EncodeToString([]byte(secretValue)) {
			t.Errorf("the Secret's password was not restored (has it: %v)", pw != "")
		}
		if a := got["Pod/forged-clear"].GetAnnotations(); a["other"] != "kept" || got["Pod/forged-clear"].GetLabels()["app"] != "forged" {
			t.Errorf("forged-clear lost what is not synchook's: annotations %v labels %v", a, got["Pod/forged-clear"].GetLabels())
		}
		if before["Pod/plain"] != got["Pod/plain"].GetResourceVersion() || before["Secret/"+undokey.DefaultSecretName] != got["Secret/"+undokey.DefaultSecretName].GetResourceVersion() {
			t.Error("an object without synchook annotations was written")
		}
	})

	t.Run("a second run is a no-op", func(t *testing.T) {
		after := resourceVersions(t, c, ns)
		code, out := runCLI(t, "--kubeconfig", kubeconfig, "--namespace", ns)
		output.WriteString(out)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if !strings.Contains(out, " 0 cleaned") || !strings.Contains(out, "can be deleted once no vcluster") {
			t.Errorf("output:\n%s", out)
		}
		if again := resourceVersions(t, c, ns); !reflect.DeepEqual(again, after) {
			t.Errorf("resourceVersions changed by a second run:\nbefore %v\nafter  %v", after, again)
		}
	})

	t.Run("a conflict makes it read the object again", func(t *testing.T) { testRereadsOnConflict(t, env) })
	t.Run("without a key it removes sealed undos and says so", func(t *testing.T) { testWithoutKey(t, env) })

	t.Run("no output holds the Secret value", func(t *testing.T) {
		if output.Len() == 0 {
			t.Fatal("no output collected")
		}
		checkNoSecret(t, "output", output.String())
	})
}

// testRereadsOnConflict: an Update that conflicts makes Run read the object again and
// recompute, keeping the other writer's change.
func testRereadsOnConflict(t *testing.T, env *envtest.Environment) {
	ctx := t.Context()
	base, err := client.NewWithWatch(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, ring := hookedRegistry(t)
	const ns = "vc-race"
	createNamespace(t, base, ns)
	createHooked(t, base, reg, podGVK, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"vc-race","labels":{"app":"web"}},
		"spec":{"automountServiceAccountToken":false,"containers":[{"name":"c","image":"busybox"}]}}`)

	// Someone else writes the pod between Run's list and its first update.
	updates := 0
	c := interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			if updates == 1 {
				var pod corev1.Pod
				if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), &pod); err != nil {
					return err
				}
				pod.Labels["meanwhile"] = "yes"
				if err := cl.Update(ctx, &pod); err != nil {
					return err
				}
			}
			return cl.Update(ctx, obj, opts...)
		},
	})
	var progress bytes.Buffer
	sum, err := cleanup.Run(ctx, cleanup.Options{Client: c, Namespace: ns, Kinds: []schema.GroupVersionKind{podGVK}, Ring: ring, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Cleaned != 1 || sum.Failed != 0 || updates != 2 {
		t.Fatalf("summary %+v after %d updates, want 1 cleaned after 2:\n%s", sum, updates, progress.String())
	}
	var pod corev1.Pod
	if err := base.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels["meanwhile"] != "yes" || pod.Labels["tenant"] != "" || pod.Annotations[undo.Annotation] != "" {
		t.Errorf("labels %v annotations %v: want the concurrent label kept, the hook's label and the undo gone", pod.Labels, pod.Annotations)
	}
}

// testWithoutKey: without a key Secret or file, a sealed undo is reported as not applied and
// its annotation removed all the same.
func testWithoutKey(t *testing.T, env *envtest.Environment) {
	ctx := t.Context()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := hookedRegistry(t)
	const ns = "vc-nokey"
	createNamespace(t, c, ns)
	createHooked(t, c, reg, podGVK, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"vc-nokey"},
		"spec":{"automountServiceAccountToken":false,"containers":[{"name":"c","image":"busybox"}]}}`)

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runCLI(t, "--kubeconfig", kubeconfig, "--namespace", ns, "--kinds", "v1/Pod")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (an undo not applied):\n%s", code, out)
	}
	for _, want := range []string{"no undo key", "undo not applied (no_key)", "1 cleaned, 0 undos applied, 0 entries left unrestored, 1 undo not applied"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if left := reservedAnnotations(t, c, ns); len(left) > 0 {
		t.Errorf("synchook annotations left: %v", left)
	}
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels["tenant"] != "a" {
		t.Errorf("without the key the hook's label stays; labels %v", pod.Labels)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no namespace is a usage error", nil, "--namespace is required"},
		{"a bad kind is a usage error", []string{"--namespace", "ns", "--kinds", "Pod"}, "--kinds"},
		{"an argument is a usage error", []string{"--namespace", "ns", "extra"}, "unexpected argument"},
		{"an unknown flag is a usage error", []string{"--nope"}, "unknown flag: --nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want 2 with %q:\n%s", code, tc.want, out)
			}
		})
	}
	t.Run("help says to stop the syncer first", func(t *testing.T) {
		code, out := runCLI(t, "--help")
		if code != 0 || !strings.Contains(out, "scale statefulset") || !strings.Contains(out, "-dry-run") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
}

func TestParseKinds(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []schema.GroupVersionKind
		err      bool
	}{
		{"a core kind has no group", "v1/Pod", []schema.GroupVersionKind{podGVK}, false},
		{"a grouped kind has three parts", "apps/v1/Deployment", []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}}, false},
		{"spaces, empty items and repeats are ignored", " v1/Pod, ,v1/Secret,v1/Pod ", []schema.GroupVersionKind{podGVK, secretGVK}, false},
		{"a kind without a version is refused", "Pod", nil, true},
		{"a kind without a Kind is refused", "v1/", nil, true},
		{"a kind with too many parts is refused", "a/b/c/D", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cleanup.ParseKinds(tc.in)
			if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseKinds(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestKindsAddsTheHostKindsOfTheKeySecret(t *testing.T) {
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	got := cleanup.Kinds([]undo.Kind{
		{GVK: podGVK, Side: undo.Physical},
		{GVK: deploy, Side: undo.Physical},
		{GVK: configMapGVK, Side: undo.Virtual},
		{GVK: schema.GroupVersionKind{Group: "x.io", Version: "v1", Kind: "Virtual"}, Side: undo.Virtual},
	})
	want := append(cleanup.DefaultKinds(), deploy)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Kinds = %v, want %v", got, want)
	}
}

func hasToleration(ts []corev1.Toleration, key string) bool {
	for _, t := range ts {
		if t.Key == key {
			return true
		}
	}
	return false
}
