package vcluster

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	plugintypes "github.com/loft-sh/vcluster/pkg/plugin/types"
	v2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	"github.com/loft-sh/vcluster/pkg/plugin/v2/pluginv2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Hook types of vcluster's plugin v2 client hooks.
const (
	createPhysical = "CreatePhysical"
	updatePhysical = "UpdatePhysical"
	getPhysical    = "GetPhysical"
	applyPhysical  = "ApplyPhysical" // not a hook type synchook's config registers
)

func vkt(apiVersion, kind, hookType string) plugintypes.VersionKindType {
	return plugintypes.VersionKindType{APIVersion: apiVersion, Kind: kind, Type: hookType}
}

// TestV2ManagerRunsSynchook loads the synchook binary with vcluster's own plugin v2 manager
// and checks what the syncer sees: the client hooks it registers and the objects MutateObject
// leaves behind.
func TestV2ManagerRunsSynchook(t *testing.T) {
	m := mustStartManager(t.Context(), t, synchookPlugin(t, synchookConfig))
	shk := m.Plugins[0]

	t.Run("GetPluginConfig answers one client hook per configured kind with its types", func(t *testing.T) {
		resp, err := shk.GRPCClient.GetPluginConfig(t.Context(), &pluginv2.GetPluginConfig_Request{})
		if err != nil {
			t.Fatalf("GetPluginConfig: %v", err)
		}
		var cfg v2.PluginConfig
		if err := json.Unmarshal([]byte(resp.GetConfig()), &cfg); err != nil {
			t.Fatalf("decode %q: %v", resp.GetConfig(), err)
		}
		got := map[string][]string{}
		for _, h := range cfg.ClientHooks {
			key := h.APIVersion + " " + h.Kind
			got[key] = append(got[key], h.Types...)
		}
		want := map[string][]string{
			"v1 Pod":     {createPhysical, updatePhysical, getPhysical},
			"v1 Service": {createPhysical},
			"v1 Secret":  {createPhysical},
		}
		for key, types := range want {
			for _, typ := range types {
				if !slices.Contains(got[key], typ) {
					t.Errorf("%s: type %s missing (config %s)", key, typ, resp.GetConfig())
				}
			}
		}
		for key, types := range got {
			for _, typ := range types {
				// automatic undo: a kind with write hooks also registers the read type that
				// takes their change back
				if !slices.Contains(want[key], typ) && typ != getPhysical {
					t.Errorf("%s: type %s was not configured (config %s)", key, typ, resp.GetConfig())
				}
			}
			if _, ok := want[key]; !ok {
				t.Errorf("kind %s was not configured (config %s)", key, resp.GetConfig())
			}
		}
	})

	t.Run("the manager registers exactly the configured kinds and hook types", func(t *testing.T) {
		for _, tc := range []struct {
			vkt  plugintypes.VersionKindType
			want bool
		}{
			{vkt("v1", "Pod", createPhysical), true},
			{vkt("v1", "Pod", updatePhysical), true},
			{vkt("v1", "Pod", getPhysical), true},
			{vkt("v1", "Service", createPhysical), true},
			{vkt("v1", "Secret", createPhysical), true},
			{vkt("v1", "Service", updatePhysical), false},
			{vkt("v1", "Secret", updatePhysical), false},
			{vkt("v1", "Pod", "DeletePhysical"), false},
			{vkt("v1", "ConfigMap", createPhysical), false},
			{vkt("v1", "Pod", applyPhysical), false},
			{vkt("apps/v1", "Deployment", createPhysical), false},
		} {
			if got := m.HasClientHooksForType(tc.vkt); got != tc.want {
				t.Errorf("HasClientHooksForType(%s %s %s) = %v, want %v", tc.vkt.APIVersion, tc.vkt.Kind, tc.vkt.Type, got, tc.want)
			}
		}
	})

	for _, tc := range []struct {
		name     string
		obj      client.Object
		hookType string
		want     client.Object
		check    func(t *testing.T, got client.Object) // extra checks, after the comparison with want
	}{
		{
			name:     "a pod created on the host gets the tenant label and the owner annotation and keeps its own labels",
			obj:      testPod(),
			hookType: createPhysical,
			want: withMeta(testPod(),
				map[string]string{"vcluster.example.com/tenant": "team-a"},
				map[string]string{"synchook.io/owner": "platform"}),
		},
		{
			name:     "a pod updated on the host gets the same labels and annotation",
			obj:      testPod(),
			hookType: updatePhysical,
			want: withMeta(testPod(),
				map[string]string{"vcluster.example.com/tenant": "team-a"},
				map[string]string{"synchook.io/owner": "platform"}),
		},
		{
			name: "a pod without labels or annotations gets both maps",
			obj: func() client.Object {
				p := testPod()
				p.Labels, p.Annotations = nil, nil
				return p
			}(),
			hookType: createPhysical,
			want: func() client.Object {
				p := testPod()
				p.Labels = map[string]string{"vcluster.example.com/tenant": "team-a"}
				p.Annotations = map[string]string{"synchook.io/owner": "platform"}
				return p
			}(),
		},
		{
			name:     "a pod read from the host loses the pool label and its node name although vcluster decodes the answer into the object it sent",
			obj:      hostPod(),
			hookType: getPhysical,
			want: func() client.Object {
				p := hostPod()
				delete(p.Labels, "host.example.com/pool")
				p.Spec.NodeName = ""
				return p
			}(),
			check: func(t *testing.T, got client.Object) {
				p := got.(*corev1.Pod)
				if _, ok := p.Labels["host.example.com/pool"]; ok {
					t.Errorf("label host.example.com/pool is still there: %v", p.Labels)
				}
				if p.Spec.NodeName != "" {
					t.Errorf("spec.nodeName = %q, want it gone", p.Spec.NodeName)
				}
				if p.Labels["app"] != "web" {
					t.Errorf("label app = %q, want the pod's own label kept", p.Labels["app"])
				}
			},
		},
		{
			name: "a pod read from the host whose only label is the pool label ends without it",
			obj: func() client.Object {
				p := hostPod()
				p.Labels = map[string]string{"host.example.com/pool": "gpu"}
				return p
			}(),
			hookType: getPhysical,
			want: func() client.Object {
				p := hostPod()
				p.Labels = nil
				p.Spec.NodeName = ""
				return p
			}(),
		},
		{
			name:     "a service created on the host gets the tenant label",
			obj:      testService(),
			hookType: createPhysical,
			want:     withMeta(testService(), map[string]string{"vcluster.example.com/tenant": "team-a"}, nil),
		},
		{
			name:     "a secret created on the host gets the synced label and its data stays byte-identical",
			obj:      testSecret(),
			hookType: createPhysical,
			want:     withMeta(testSecret(), map[string]string{"vcluster.example.com/synced": "true"}, nil),
			check: func(t *testing.T, got client.Object) {
				s := got.(*corev1.Secret)
				if !equality.Semantic.DeepEqual(s.Data, testSecret().Data) {
					t.Errorf("secret data = %q, want %q", s.Data, testSecret().Data)
				}
			},
		},
		{
			name:     "a config map, which no hook handles, is left alone without calling the plugin",
			obj:      testConfigMap(),
			hookType: createPhysical,
			want:     testConfigMap(),
		},
		{
			name:     "a hook type the plugin did not register is left alone",
			obj:      testPod(),
			hookType: applyPhysical,
			want:     testPod(),
		},
		{
			name:     "a service read from the host, a type registered only for pods, is left alone",
			obj:      testService(),
			hookType: getPhysical,
			want:     testService(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.obj.DeepCopyObject().(client.Object)
			if err := m.MutateObject(t.Context(), got, tc.hookType, scheme.Scheme); err != nil {
				t.Fatalf("MutateObject(%s): %v", tc.hookType, err)
			}
			got = withoutUndo(got)
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("MutateObject(%s) left\n%s\nwant\n%s", tc.hookType, mustJSON(t, got), mustJSON(t, tc.want))
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}

	t.Run("a pod written to the host and read back comes back exactly as the syncer sent it, without the host's pool label and node name", func(t *testing.T) {
		sent := testPod()
		onHost := sent.DeepCopy()
		if err := m.MutateObject(t.Context(), onHost, createPhysical, scheme.Scheme); err != nil {
			t.Fatalf("MutateObject(%s): %v", createPhysical, err)
		}
		if onHost.Labels["vcluster.example.com/tenant"] != "team-a" {
			t.Fatalf("labels on the host = %v, want the tenant label", onHost.Labels)
		}
		// the host schedules the pod and its admission adds the pool label
		onHost.Labels["host.example.com/pool"] = "gpu"
		onHost.Spec.NodeName = "host-node-7"
		read := onHost.DeepCopy()
		if err := m.MutateObject(t.Context(), read, getPhysical, scheme.Scheme); err != nil {
			t.Fatalf("MutateObject(%s): %v", getPhysical, err)
		}
		if !equality.Semantic.DeepEqual(read, sent) {
			t.Errorf("read back\n%s\nwant what the syncer sent\n%s", mustJSON(t, read), mustJSON(t, sent))
		}
	})

	podJSON := string(mustJSON(t, testPod()))
	for _, tc := range []struct {
		name        string
		req         *pluginv2.Mutate_Request
		wantCode    codes.Code // codes.OK: no error
		wantMutated bool
	}{
		{
			name:     "a truncated object is answered with InvalidArgument",
			req:      &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: createPhysical, Object: `{"apiVersion":"v1","kind":"Pod","metadata":`},
			wantCode: codes.InvalidArgument,
		},
		{
			name:     "a pod whose spec is a string is answered with InvalidArgument when its hooks read the spec",
			req:      &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: getPhysical, Object: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":"not-an-object"}`},
			wantCode: codes.InvalidArgument,
		},
		{
			name:     "a pod whose labels are a string is answered with InvalidArgument",
			req:      &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: createPhysical, Object: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","labels":"x"},"spec":{}}`},
			wantCode: codes.InvalidArgument,
		},
		{
			name:     "an array is answered with InvalidArgument",
			req:      &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: createPhysical, Object: `[1,2]`},
			wantCode: codes.InvalidArgument,
		},
		{
			name:     "an empty object is answered with InvalidArgument",
			req:      &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: createPhysical, Object: ``},
			wantCode: codes.InvalidArgument,
		},
		{
			name: "a hook type without hooks is answered mutated=false without an error",
			req:  &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: applyPhysical, Object: podJSON},
		},
		{
			name:        "a registered hook type called directly is answered mutated=true",
			req:         &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: createPhysical, Object: podJSON},
			wantMutated: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := shk.GRPCClient.Mutate(t.Context(), tc.req)
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("Mutate: code %s (error %v), want %s", got, err, tc.wantCode)
			}
			if err != nil {
				t.Logf("error: %v", err)
				return
			}
			if resp.GetMutated() != tc.wantMutated {
				t.Errorf("Mutate: mutated = %v, want %v (object %.200s)", resp.GetMutated(), tc.wantMutated, resp.GetObject())
			}
		})
	}

	t.Run("a pod whose spec is a string, under hooks that only touch metadata, is refused or keeps the spec as sent", func(t *testing.T) {
		// synchook's labels hooks may work on metadata alone and never decode the spec; then
		// the answer must carry the spec exactly as sent (vcluster's own decode then fails), never
		// a rewritten one.
		const obj = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":"not-an-object"}`
		resp, err := shk.GRPCClient.Mutate(t.Context(), &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: createPhysical, Object: obj})
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("Mutate: %v, want InvalidArgument or an answer", err)
			}
			return
		}
		var answer struct {
			Spec json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal([]byte(resp.GetObject()), &answer); err != nil {
			t.Fatalf("answer %s is not JSON: %v", resp.GetObject(), err)
		}
		if resp.GetMutated() && string(answer.Spec) != `"not-an-object"` {
			t.Errorf("answer's spec = %s, want the string as sent", answer.Spec)
		}
		t.Logf("answered mutated=%v: %s", resp.GetMutated(), resp.GetObject())
	})

	t.Run("after the errors the plugin still mutates", func(t *testing.T) {
		got := testPod()
		if err := m.MutateObject(t.Context(), got, createPhysical, scheme.Scheme); err != nil {
			t.Fatalf("MutateObject: %v", err)
		}
		if got.Labels["vcluster.example.com/tenant"] != "team-a" {
			t.Errorf("labels = %v, want the tenant label", got.Labels)
		}
	})
}

// TestV2ManagerRejectsBadSynchookConfig: a config synchook cannot load makes it exit before the
// go-plugin handshake, and vcluster's Manager.Start fails instead of registering nothing.
func TestV2ManagerRejectsBadSynchookConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
	}{
		{
			name: "a misspelled key in a hook makes Start fail",
			config: `
hooks:
  - name: pod-labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    lables: {labels: {a: b}}
`,
		},
		{
			name: "an unknown hook type makes Start fail",
			config: `
hooks:
  - name: pod-labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysicall]
    labels: {labels: {a: b}}
`,
		},
		{
			name: "a strip path that is not a JSON Pointer makes Start fail",
			config: `
hooks:
  - name: strip
    resources: [{apiVersion: v1, kind: Pod}]
    types: [GetPhysical]
    strip: {paths: ["no-leading-slash"]}
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			m, err := startManager(t.Context(), t, synchookPlugin(t, tc.config))
			if err == nil {
				t.Fatalf("Start succeeded with %d plugins loaded; want an error", len(m.Plugins))
			}
			t.Logf("Start failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
			if !strings.Contains(err.Error(), "synchook/plugin") {
				t.Errorf("error %q does not name the plugin's path", err)
			}
			if len(m.Plugins) != 0 {
				t.Errorf("manager kept %d plugins after a failed start", len(m.Plugins))
			}
		})
	}
}

// TestV2ManagerChainsSynchookAfterAnotherPlugin: vcluster calls every plugin that registered a
// hook, in the order of their directory names, each on the previous plugin's answer.
func TestV2ManagerChainsSynchookAfterAnotherPlugin(t *testing.T) {
	m := mustStartManager(t.Context(), t,
		pluginSpec{Dir: "a-sdk", Binary: binary(t, binSDK), Config: map[string]any{"labelKey": "example.com/first", "labelValue": "sdk"}},
		synchookPlugin(t, synchookConfig),
	)

	t.Run("a pod gets the first plugin's label and then synchook's labels and annotation", func(t *testing.T) {
		got := testPod()
		if err := m.MutateObject(t.Context(), got, createPhysical, scheme.Scheme); err != nil {
			t.Fatalf("MutateObject: %v", err)
		}
		got = withoutUndo(got)
		want := withMeta(testPod(),
			map[string]string{"example.com/first": "sdk", "vcluster.example.com/tenant": "team-a"},
			map[string]string{"synchook.io/owner": "platform"})
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("MutateObject left\n%s\nwant\n%s", mustJSON(t, got), mustJSON(t, want))
		}
	})
}

// TestV2ReferencePlugins checks the benchmark's reference plugins under vcluster's manager.
func TestV2ReferencePlugins(t *testing.T) {
	for _, tc := range []struct {
		name string
		bin  string
		want client.Object
	}{
		{
			name: "the sdk-style plugin adds the tenant label to a pod",
			bin:  binSDK,
			want: withMeta(testPod(), map[string]string{"vcluster.example.com/tenant": "team-a"}, nil),
		},
		{
			name: "the echo plugin answers the pod unchanged",
			bin:  binEcho,
			want: testPod(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustStartManager(t.Context(), t, pluginSpec{Dir: tc.bin, Binary: binary(t, tc.bin)})
			if !m.HasClientHooksForType(vkt("v1", "Pod", createPhysical)) {
				t.Fatal("no client hook for v1 Pod CreatePhysical")
			}
			got := testPod()
			if err := m.MutateObject(t.Context(), got, createPhysical, scheme.Scheme); err != nil {
				t.Fatalf("MutateObject: %v", err)
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("MutateObject left\n%s\nwant\n%s", mustJSON(t, got), mustJSON(t, tc.want))
			}
			big := benchPod()
			got = big.DeepCopy()
			if err := m.MutateObject(t.Context(), got, createPhysical, scheme.Scheme); err != nil {
				t.Fatalf("MutateObject(benchmark pod): %v", err)
			}
			if n := len(mustJSON(t, big)); n < 4<<10 || n > 7<<10 {
				t.Errorf("benchmark pod is %d bytes of JSON, want about 5 KiB", n)
			}
		})
	}
}

// undoAnnotation is where synchook records how to take its changes back when the syncer reads
// the object again (automatic undo); the tests of the write path compare objects without it
// and check the undo by reading the object back.
const undoAnnotation = "synchook.io/undo"

// withoutUndo removes undoAnnotation from obj (and the annotations when it was the only one).
func withoutUndo[T client.Object](obj T) T {
	a := obj.GetAnnotations()
	if _, ok := a[undoAnnotation]; !ok {
		return obj
	}
	delete(a, undoAnnotation)
	if len(a) == 0 {
		a = nil
	}
	obj.SetAnnotations(a)
	return obj
}

func withMeta[T client.Object](obj T, labels, annotations map[string]string) T {
	if len(labels) > 0 {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		obj.SetLabels(l)
	}
	if len(annotations) > 0 {
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		for k, v := range annotations {
			a[k] = v
		}
		obj.SetAnnotations(a)
	}
	return obj
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "web-0-x-default-x-e2e",
			Namespace:   "vcluster-e2e",
			Labels:      map[string]string{"app": "web", "vcluster.loft.sh/namespace": "default"},
			Annotations: map[string]string{"vcluster.loft.sh/object-name": "web-0"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
		},
	}
}

func hostPod() *corev1.Pod {
	p := testPod()
	p.Labels["host.example.com/pool"] = "gpu"
	p.Spec.NodeName = "host-node-7"
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.3.7"}
	return p
}

func testService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-x-default-x-e2e", Namespace: "vcluster-e2e", Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}

func testSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds-x-default-x-e2e", Namespace: "vcluster-e2e"},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"password": []byte("s3cr3t\x00\xff binary\n"),
			"empty":    {},
		},
		StringData: nil,
	}
}

func testConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg-x-default-x-e2e", Namespace: "vcluster-e2e", Labels: map[string]string{"app": "web"}},
		Data:       map[string]string{"k": "v"},
	}
}

// TestV2ManagerLogsWhySynchookRejectsItsConfig: when synchook exits on a bad config, Start's
// error is go-plugin's generic "Unrecognized remote plugin message ... Failed to read any lines
// from plugin's stdout" (with hints about architectures and permissions), so the only place a
// vcluster user can learn the reason is vcluster's log. go-plugin copies the plugin's stderr
// there through vcluster's hclog logger (level Info) only for lines it can give a level: hclog
// JSON ("@level", "@message", optional "@timestamp" as 2006-01-02T15:04:05.000000Z07:00) or
// text starting with "[ERROR]", "[WARN]", "[INFO]"; any other line is logged at Debug and
// dropped, and vcluster sets no ClientConfig.Stderr to copy it raw.
func TestV2ManagerLogsWhySynchookRejectsItsConfig(t *testing.T) {
	spec := synchookPlugin(t, `
hooks:
  - name: pod-labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    lables: {labels: {a: b}}
`)
	c := captureOutput(t)
	_, err := startManager(t.Context(), t, spec)
	c.release()
	stdout, stderr := c.output()
	if err == nil {
		t.Fatal("Start succeeded; want an error")
	}
	t.Run("vcluster's log names the misspelled key", func(t *testing.T) {
		if !strings.Contains(stdout+stderr, "lables") {
			t.Errorf("vcluster's log does not mention the unknown key \"lables\"; Start: %v\nlog (stdout):\n%s\nstderr:\n%s", firstLine(err.Error()), stdout, stderr)
		}
	})
}

// TestV2ManagerWithoutSynchookConfig: vcluster sets PLUGIN_CONFIG only when the values have a
// plugins.<name> entry (to "{}" when its config is empty), and passes the syncer's whole
// environment to the plugin (cmd.Env = os.Environ(); SkipHostEnv only stops go-plugin from
// adding it twice).
func TestV2ManagerWithoutSynchookConfig(t *testing.T) {
	for _, tc := range []struct {
		name           string
		config         map[string]any // nil: no plugins.synchook entry
		synchookConfig string         // SYNCHOOK_CONFIG in the syncer's environment
		wantLabel      string
	}{
		{
			name:      "without a plugins entry synchook runs its default hook",
			wantLabel: "synchook.io/hooked",
		},
		{
			name:      "with an empty config synchook runs its default hook",
			config:    map[string]any{},
			wantLabel: "synchook.io/hooked",
		},
		{
			name:   "with an empty config synchook reads SYNCHOOK_CONFIG inherited from the syncer's environment",
			config: map[string]any{},
			synchookConfig: `
hooks:
  - name: from-env
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels: {labels: {example.com/from-env: "yes"}}
`,
			wantLabel: "example.com/from-env",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SYNCHOOK_CONFIG", tc.synchookConfig)
			m := mustStartManager(t.Context(), t, pluginSpec{Dir: "synchook", Binary: binary(t, binSynchook), Config: tc.config})
			got := testPod()
			if err := m.MutateObject(t.Context(), got, createPhysical, scheme.Scheme); err != nil {
				t.Fatalf("MutateObject: %v", err)
			}
			if got.Labels[tc.wantLabel] == "" {
				t.Errorf("labels = %v, want %s", got.Labels, tc.wantLabel)
			}
		})
	}
}
