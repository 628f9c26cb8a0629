package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/hoststore"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/undo"
)

// storedCase is one shape of the storage oracle: a config of write hooks and the object the
// syncer sends, shaped as users' objects are (one key, empty lists, host defaults).
type storedCase struct {
	name, config, object string
	// update is the tenant's change the syncer sends next, as a JSON merge of the read view.
	update string
	// status and hostStatus, when set, are the Pod status a kubelet writes (status
	// subresource) on the object the syncer sent and on the hooked one, after the Create:
	// what it pulled is what each spec names.
	status, hostStatus string
	// hostMutates, when set, labels both namespaces host-mutates=hostMutates: the host's
	// MutatingAdmissionPolicy of that name (hostPolicies) acts on both objects.
	hostMutates string
	// goHook, when set, is a Go hook registered beside config's (config may be empty): the
	// typed path, whose answer is spliced from the request's record.
	goHook hooks.ClientHook
}

// nodePool is the Go hook a hook ported from vcluster-sdk is (the benchmarks' typed hook): it
// sets spec.nodeSelector's pool on Pods on their way to the host.
var nodePool = hooks.Typed("node-pool", []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, func(_ context.Context, p *corev1.Pod) error {
	if p.Spec.NodeSelector == nil {
		p.Spec.NodeSelector = map[string]string{}
	}
	p.Spec.NodeSelector["pool"] = "tenants"
	return nil
})

// strip is a config with one strip hook of paths on kind (v1 or a custom resource).
func strip(apiVersion, kind string, paths ...string) string {
	return fmt.Sprintf(`hooks:
  - name: strip
    resources: [{apiVersion: %s, kind: %s}]
    types: [CreatePhysical, UpdatePhysical]
    strip: {paths: [%q]}
`, apiVersion, kind, strings.Join(paths, `", "`))
}

// defaultTolerations are what a tenant's apiserver (DefaultTolerationSeconds) gave every pod,
// and vcluster sends on.
const defaultTolerations = `
    - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
    - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 300}`

func pod(spec string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers: [{name: web, image: nginx}]
` + spec
}

// kubeletStatus is the status a kubelet reports of a pod whose container web runs image, with
// the digest the registry gave. (The image volume's imageRef in a mount's volumeStatus is not
// stored by kube-apiserver v1.37 without its alpha feature gate; builtin's tests cover it.)
func kubeletStatus(image string) string {
	const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	return fmt.Sprintf(`{"status":{"phase":"Running","containerStatuses":[{"name":"web","image":%q,"imageID":%q,`+
		`"ready":true,"restartCount":0,"state":{"running":{"startedAt":"2026-11-27T00:00:00Z"}}}]}}`,
		image, "docker-pullable://"+image[:strings.LastIndexByte(image, ':')]+digest)
}

var storedCases = []storedCase{
	{
		name: "Secret, its only key stripped", config: strip("v1", "Secret", "/data/password"),
		object: `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {password: cHc=}}`, update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{
		name: "Secret, one of two keys stripped", config: strip("v1", "Secret", "/data/password"),
		object: `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {password: cHc=, user: dQ==}}`, update: `{"data":{"user":"dg=="}}`,
	},
	{
		name: "ConfigMap, its only key stripped", config: strip("v1", "ConfigMap", "/data/key"),
		object: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {key: v}}`, update: `{"metadata":{"annotations":{"rev":"2"}}}`,
	},
	{
		name: "Pod, its only label stripped", config: strip("v1", "Pod", "/metadata/labels/app"),
		object: pod("  tolerations:" + defaultTolerations), update: `{"metadata":{"annotations":{"rev":"2"}}}`,
	},
	{
		name: "Pod, all tolerations stripped: the host adds its defaults again", config: strip("v1", "Pod", "/spec/tolerations/*"),
		object: pod("  tolerations:\n    - {key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}" + defaultTolerations), update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{
		name: "Pod, its only nodeSelector key stripped", config: strip("v1", "Pod", "/spec/nodeSelector/disk"),
		object: pod("  nodeSelector: {disk: ssd}\n  tolerations:" + defaultTolerations), update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{
		name: "Pod with one label, an empty list and no nodeSelector, a Go hook sets the pool (the typed path)", goHook: nodePool,
		object: pod("  imagePullSecrets: []\n  tolerations:" + defaultTolerations), update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{
		name: "Pod whose nodeSelector has one key, a Go hook adds the pool beside it (the typed path)", goHook: nodePool,
		object: pod("  nodeSelector: {disk: ssd}\n"), update: `{"metadata":{"annotations":{"rev":"2"}}}`,
	},
	{
		name: "Pod, the last env var (the list) stripped", config: strip("v1", "Pod", "/spec/containers/0/env/*"),
		object: `{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {containers: [{name: web, image: nginx, env: [{name: A, value: "1"}]}]}}`, update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{
		name: "Pod, a nested object's only field stripped", config: strip("v1", "Pod", "/spec/securityContext/runAsNonRoot"),
		object: pod("  securityContext: {runAsNonRoot: true}"), update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{name: "Pod without labels, a label added", config: `hooks:
  - name: labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    labels: {labels: {tenant: a}}
`, object: `{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {containers: [{name: web, image: nginx}]}}`, update: `{"metadata":{"annotations":{"rev":"2"}}}`},
	{
		name: "Pod with the tenant's own synchook.io annotations, a label added", config: `hooks:
  - name: labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    labels: {labels: {tenant: a}}
`, object: `{apiVersion: v1, kind: Pod, metadata: {name: web, annotations: {synchook.io/undo: "[]", synchook.io/mutated-by: "x@y#z"}}, spec: {containers: [{name: web, image: nginx}]}}`,
		update: `{"metadata":{"annotations":{"synchook.io/mutated-by":"forged@v9#00000000"}}}`,
	},
	{
		name: "Pod, its images mirrored, and what the kubelet reports of them mapped back", config: `hooks:
  - name: mirror
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical, GetPhysical]
    image: {rules: [{from: docker.io, to: registry.internal/dockerhub}]}
`,
		object: `{apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {containers: [{name: web, image: "nginx:1.27", volumeMounts: [{name: data, mountPath: /data}]}], ` +
			`volumes: [{name: data, image: {reference: "busybox:1.36"}}]}}`,
		update:     `{"metadata":{"labels":{"rev":"2"}}}`,
		status:     kubeletStatus("docker.io/library/nginx:1.27"),
		hostStatus: kubeletStatus("registry.internal/dockerhub/library/nginx:1.27"),
	},
	{
		name: "Service, its only selector key stripped", config: strip("v1", "Service", "/spec/selector/app"),
		object: `{apiVersion: v1, kind: Service, metadata: {name: svc}, spec: {selector: {app: web}, ports: [{name: http, port: 80}]}}`, update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{
		name: "Service, its only port's name stripped", config: strip("v1", "Service", "/spec/ports/0/name"),
		object: `{apiVersion: v1, kind: Service, metadata: {name: svc}, spec: {ports: [{name: http, port: 80}]}}`, update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{
		name: "custom resource (stored as JSON), its only key and its list stripped", config: strip("example.com/v1", "Widget", "/spec/config/only", "/spec/items/*"),
		object: `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {config: {only: x}, items: [a, b]}}`, update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
}

// widgetCRD is the custom resource of the table: any spec, stored as JSON, and in it an object
// spec.tuning (any fields) with structural defaults: {} for spec.tuning itself, and replicas
// and mode in it, which the apiserver defaults into every Widget's spec.tuning.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	tuning := apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: &preserve, Default: &apiextensionsv1.JSON{Raw: []byte(`{}`)},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"replicas": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte(`1`)}},
			"mode":     {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"balanced"`)}},
		},
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {
						Type: "object", XPreserveUnknownFields: &preserve,
						Properties: map[string]apiextensionsv1.JSONSchemaProps{"tuning": tuning},
					}},
				}},
			}},
		},
	}
}

// TestTheReadIsRightOnWhatARealAPIServerStores is the storage oracle: each write's result is
// created (then updated) in a real kube-apiserver, got back and read through synchook; the
// read must equal the object the syncer sent as that same apiserver stores it without
// synchook, in everything but what the apiserver assigns (uid, resourceVersion,
// creationTimestamp, managedFields, a Service's cluster IPs). It also holds the in-process
// model (package hoststore, what `synchook test` and the fuzz targets use) to the apiserver:
// wherever the written object has a value, the model keeps it exactly when the apiserver does.
func TestTheReadIsRightOnWhatARealAPIServerStores(t *testing.T) {
	c := startStore(t)
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	installHostPolicies(t, c)
	for i, tc := range slices.Concat(storedCases, createdParentCases) {
		t.Run(tc.name, func(t *testing.T) {
			reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
			if tc.config != "" {
				cfg, err := config.Parse([]byte(tc.config))
				if err != nil {
					t.Fatal(err)
				}
				if err := cfg.Build(reg); err != nil {
					t.Fatal(err)
				}
			}
			if tc.goHook != nil {
				reg.MustRegister(tc.goHook)
			}
			plainNS, hookedNS := fmt.Sprintf("plain-%d", i), fmt.Sprintf("hooked-%d", i)
			for _, ns := range []string{plainNS, hookedNS} {
				namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
				if tc.hostMutates != "" {
					namespace.Labels = map[string]string{hostMutatesLabel: tc.hostMutates}
				}
				if err := c.Create(t.Context(), namespace); err != nil {
					t.Fatal(err)
				}
			}
			sent, err := yaml.YAMLToJSON([]byte(tc.object))
			if err != nil {
				t.Fatal(err)
			}
			gvk, err := engine.ObjectGVK(sent)
			if err != nil {
				t.Fatal(err)
			}
			o := oracle{t: t, c: c, reg: reg, gvk: gvk}

			// Create: the plain object, and the hooked one read back.
			plain := o.write(plainNS, sent, false)
			stored := o.write(hookedNS, o.mutate(hooks.CreatePhysical, inNamespace(t, sent, hookedNS)), true)
			view := o.read(stored)
			o.same("create", view, plain)
			if tc.status != "" {
				// The kubelet reports what it pulled; the read maps the host's report back.
				plain = o.writeStatus(mergeJSON(t, plain, tc.status))
				view = o.read(o.writeStatus(mergeJSON(t, stored, tc.hostStatus)))
				o.same("status", view, plain)
			}

			// Update: the tenant's change on each side's view, as the syncer sends it.
			plain = o.write(plainNS, mergeJSON(t, plain, tc.update), false)
			// (hoststore models a write of the object, not of its status subresource: an update
			// keeps the status the kubelet wrote, whatever the view sent carries of it.)
			stored = o.write(hookedNS, o.mutate(hooks.UpdatePhysical, mergeJSON(t, view, tc.update)), tc.status == "")
			o.same("update", o.read(stored), plain)

			// An update sent from the stored object itself (the sealed undo on it, as a client
			// that writes back what it listed sends it), with one more change of the tenant's:
			// the write applies its own undo first (undo.Rule.BeforeWrite) and records only the
			// new change.
			const again = `{"metadata":{"labels":{"again":"1"}}}`
			plain = o.write(plainNS, mergeJSON(t, plain, again), false)
			stored = o.write(hookedNS, o.mutate(hooks.UpdatePhysical, mergeJSON(t, stored, again)), tc.status == "")
			o.same("update from the stored object", o.read(stored), plain)
		})
	}
	t.Run("after a config change", func(t *testing.T) { testAfterAConfigChange(t, c, ring) })
}

// startStore starts a kube-apiserver and etcd (envtest, with the Widget custom resource) for
// the test and returns a client of it.
func startStore(t *testing.T) client.Client {
	t.Helper()
	dir, err := testenv.AssetsDir()
	if err != nil {
		t.Fatalf("envtest assets: %v", err)
	}
	env := testenv.WithTimeouts(&envtest.Environment{BinaryAssetsDirectory: dir, CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()}})
	if _, err := env.Start(); err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// oracle runs one case's steps.
type oracle struct {
	t   *testing.T
	c   client.Client
	reg *engine.Registry
	gvk schema.GroupVersionKind
}

// mutate runs the chain of typ on raw and returns its result.
func (o oracle) mutate(typ hooks.HookType, raw []byte) []byte {
	o.t.Helper()
	res, err := o.reg.Mutate(o.t.Context(), o.gvk, typ, raw)
	if err != nil {
		o.t.Fatalf("%s: %v", typ, err)
	}
	out, err := res.Object()
	if err != nil {
		o.t.Fatal(err)
	}
	o.answerGives(typ, raw, res, out)
	return out
}

// answerGives checks res's answer as vcluster's plugin managers read it: decoded with
// encoding/json INTO the typed object they sent (raw), it must give out, the object the
// patch makes (nil and empty maps and lists alike: the typed object keeps no difference).
// A kind without a Go type is decoded whole by Unstructured, so only typed kinds are checked.
func (o oracle) answerGives(typ hooks.HookType, raw []byte, res engine.Result, out []byte) {
	o.t.Helper()
	ans, err := res.Answer()
	if err != nil {
		o.t.Fatalf("%s: answer: %v", typ, err)
	}
	into, want := o.reg.NewObject(o.gvk), o.reg.NewObject(o.gvk)
	if _, untyped := into.(*unstructured.Unstructured); untyped || ans == nil {
		return
	}
	for _, d := range []struct {
		data []byte
		into any
	}{{raw, into}, {ans, into}, {out, want}} {
		if err := json.Unmarshal(d.data, d.into); err != nil {
			o.t.Fatalf("%s: decode: %v", typ, err)
		}
	}
	if !equality.Semantic.DeepEqual(into, want) {
		o.t.Fatalf("%s: the answer decoded into the request's object is not the patched object:\nanswer %s\n patched %s", typ, ans, out)
	}
}

// read is GetPhysical of the stored object: what the syncer reads.
func (o oracle) read(stored []byte) []byte { return o.mutate(hooks.GetPhysical, stored) }

// write creates raw in namespace ns (or updates it, when it has a resourceVersion), gets it
// back and returns the stored object. With model, it also checks package hoststore's model
// against what the apiserver stored.
func (o oracle) write(ns string, raw []byte, model bool) []byte {
	o.t.Helper()
	raw = inNamespace(o.t, raw, ns)
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		o.t.Fatal(err)
	}
	var err error
	if u.GetResourceVersion() == "" {
		err = o.c.Create(o.t.Context(), u)
	} else {
		err = o.c.Update(o.t.Context(), u)
	}
	if err != nil {
		o.t.Fatalf("write %s/%s: %v\n%s", ns, u.GetName(), err, raw)
	}
	stored := o.stored(u)
	if model {
		modeled, err := hoststore.Store(o.gvk, raw)
		if err != nil {
			o.t.Fatal(err)
		}
		if d := modelDisagrees(decodeJSON(o.t, raw), decodeJSON(o.t, modeled), decodeJSON(o.t, stored), ""); d != "" {
			o.t.Errorf("package hoststore's model and the apiserver disagree at %s:\nwritten %s\nmodel   %s\nstored  %s", d, raw, modeled, stored)
		}
	}
	return stored
}

// writeStatus writes the status of raw (a stored object) through the status subresource, as a
// kubelet does, and returns the object stored then.
func (o oracle) writeStatus(raw []byte) []byte {
	o.t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		o.t.Fatal(err)
	}
	if err := o.c.Status().Update(o.t.Context(), u); err != nil {
		o.t.Fatalf("write the status of %s/%s: %v\n%s", u.GetNamespace(), u.GetName(), err, raw)
	}
	return o.stored(u)
}

// stored gets u back from the apiserver and returns the object as it stores it (JSON).
func (o oracle) stored(u *unstructured.Unstructured) []byte {
	o.t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(o.gvk)
	if err := o.c.Get(o.t.Context(), client.ObjectKeyFromObject(u), got); err != nil {
		o.t.Fatal(err)
	}
	stored, err := got.MarshalJSON()
	if err != nil {
		o.t.Fatal(err)
	}
	return stored
}

// same fails unless the read view equals the plain stored object but for what the apiserver
// assigns.
func (o oracle) same(step string, view, plain []byte) {
	o.t.Helper()
	v, p := comparableStored(o.t, view), comparableStored(o.t, plain)
	if !reflect.DeepEqual(v, p) {
		vb, _ := json.MarshalIndent(v, "", " ")
		pb, _ := json.MarshalIndent(p, "", " ")
		o.t.Errorf("%s: the read of the stored object is not the object the syncer sent as stored:\nread\n%s\nsent, stored\n%s", step, vb, pb)
	}
}

// comparableStored decodes a stored object without what the apiserver assigns.
func comparableStored(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	m, _ := decodeJSON(t, raw).(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "namespace", "generation"} {
		delete(meta, k)
	}
	if spec, ok := m["spec"].(map[string]any); ok && m["kind"] == "Service" {
		delete(spec, "clusterIP")
		delete(spec, "clusterIPs")
	}
	return m
}

// modelDisagrees walks written and returns the first path at which the model keeps a value
// the apiserver dropped or the reverse, or keeps a different scalar; "" when they agree.
// What the apiserver assigns in metadata is skipped, and so is an empty map or list that the
// model drops where the apiserver's admission filled it (DefaultTolerationSeconds).
func modelDisagrees(written, model, stored any, path string) string {
	switch path {
	case "/metadata/creationTimestamp", "/metadata/uid", "/metadata/resourceVersion", "/metadata/managedFields", "/metadata/generation":
		return ""
	}
	switch w := written.(type) {
	case map[string]any:
		m, _ := model.(map[string]any)
		s, _ := stored.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(w)) {
			mv, hasM := m[k]
			sv, hasS := s[k]
			p := path + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if hasM != hasS && (!hasS || !isEmpty(w[k]) || isEmpty(sv)) { // an admission plugin may fill what the model drops empty
				return p
			}
			if hasM {
				if d := modelDisagrees(w[k], mv, sv, p); d != "" {
					return d
				}
			}
		}
	case []any:
		m, _ := model.([]any)
		s, _ := stored.([]any)
		for i := range w {
			if i >= len(m) || i >= len(s) {
				if i < len(m) != (i < len(s)) {
					return fmt.Sprintf("%s/%d", path, i)
				}
				break
			}
			if d := modelDisagrees(w[i], m[i], s[i], fmt.Sprintf("%s/%d", path, i)); d != "" {
				return d
			}
		}
	default:
		if !reflect.DeepEqual(model, stored) {
			return path
		}
	}
	return ""
}

// isEmpty reports whether v is {} or [].
func isEmpty(v any) bool {
	switch c := v.(type) {
	case map[string]any:
		return len(c) == 0
	case []any:
		return len(c) == 0
	}
	return false
}

func decodeJSON(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return v
}

// inNamespace returns raw with metadata.namespace set to ns.
func inNamespace(t *testing.T, raw []byte, ns string) []byte {
	t.Helper()
	return mergeJSON(t, raw, fmt.Sprintf(`{"metadata":{"namespace":%q}}`, ns))
}

// mergeJSON returns raw with the JSON merge patch (RFC 7396) change applied.
func mergeJSON(t *testing.T, raw []byte, change string) []byte {
	t.Helper()
	out, err := jsonpatch.MergePatch(raw, []byte(change))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
