package policy_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policy"
)

// manifest returns a policy manifest on v1 pods (CREATE, UPDATE) with the given spec lines
// (indented by 2) after matchConstraints.
func manifest(specLines string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: test
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [pods]
` + specLines
}

const labelMutation = `  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"a": "b"}}}'
`

func load(t *testing.T, m string, opts policy.Options) (*policy.Policy, error) {
	t.Helper()
	p, err := policy.Parse([]byte(m))
	if err != nil {
		return nil, err
	}
	return policy.CompileWithOptions(p, opts)
}

func TestLoadErrors(t *testing.T) {
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	cases := []struct {
		name     string
		manifest string
		opts     policy.Options
		want     []string // substrings of the error
	}{
		{
			name: "bad CEL in a JSONPatch",
			manifest: manifest(`  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "add", path: "/x", value: object.nosuch(}]'
`),
			want: []string{"spec.mutations[0].jsonPatch.expression", "compilation failed"},
		},
		{
			name: "wrong result type in an ApplyConfiguration",
			manifest: manifest(`  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "add", path: "/x", value: 1}]'
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: '"not an object"'
`),
			want: []string{"spec.mutations[1].applyConfiguration.expression", "must evaluate to Object"},
		},
		{
			name: "bad CEL in a variable and a matchCondition",
			manifest: manifest(`  variables:
    - name: v
      expression: 'object.metadata.name +'
  matchConditions:
    - name: ok
      expression: 'true'
    - name: bad
      expression: '1'
` + labelMutation),
			want: []string{"spec.variables[0].expression", "spec.matchConditions[1].expression"},
		},
		{
			name:     "authorizer is not available",
			manifest: manifest("  matchConditions:\n    - name: authz\n      expression: 'authorizer.group(\"\").resource(\"pods\").check(\"get\").allowed()'\n" + labelMutation),
			want:     []string{"spec.matchConditions[0].expression", "authorizer"},
		},
		{
			name:     "a paramRef without paramKind",
			manifest: manifest(labelMutation),
			opts:     policy.Options{Bindings: []admissionregistrationv1.MutatingAdmissionPolicyBinding{bindingOf("b", "test", &admissionregistrationv1.ParamRef{Name: "p"})}},
			want:     []string{"bindings[0].spec.paramRef", "no spec.paramKind"},
		},
		{
			name:     "a binding naming no configured policy",
			manifest: manifest(labelMutation),
			opts:     policy.Options{Bindings: []admissionregistrationv1.MutatingAdmissionPolicyBinding{bindingOf("b", "other", nil)}},
			want:     []string{"bindings[0].spec.policyName", "names no configured policy"},
		},
		{
			name:     "a paramRef with both name and selector",
			manifest: manifest("  paramKind: {apiVersion: v1, kind: ConfigMap}\n" + labelMutation),
			opts: policy.Options{Bindings: []admissionregistrationv1.MutatingAdmissionPolicyBinding{bindingOf("b", "test",
				&admissionregistrationv1.ParamRef{Name: "p", Selector: &metav1.LabelSelector{}})}},
			want: []string{"bindings[0].spec.paramRef.selector", "mutually exclusive"},
		},
		{
			name:     "reinvocationPolicy IfNeeded",
			manifest: manifest("  reinvocationPolicy: IfNeeded\n" + labelMutation),
			want:     []string{"spec.reinvocationPolicy", "IfNeeded"},
		},
		{
			name:     "unknown field",
			manifest: manifest(labelMutation + "      jsonpatch: {expression: '[]'}\n"),
			want:     []string{`unknown field "spec.mutations[0].jsonpatch"`},
		},
		{
			name:     "wrong apiVersion",
			manifest: strings.Replace(manifest(labelMutation), "admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1", 1),
			want:     []string{"want apiVersion admissionregistration.k8s.io/v1"},
		},
		{
			name: "ApplyConfiguration on a custom resource",
			manifest: strings.NewReplacer(`apiGroups: [""]`, `apiGroups: [example.com]`, "resources: [pods]", "resources: [widgets]").
				Replace(manifest(labelMutation)),
			opts: policy.Options{Kinds: []schema.GroupVersionKind{widget}},
			want: []string{"spec.mutations[0].patchType", "custom resource example.com/v1, Kind=Widget; use JSONPatch"},
		},
		{
			name: "custom resource without a kind",
			manifest: strings.NewReplacer(`apiGroups: [""]`, `apiGroups: [example.com]`, "resources: [pods]", "resources: [widgets]").
				Replace(manifest(labelMutation)),
			want: []string{"spec.matchConstraints.resourceRules[0].resources[0]", "give its kind"},
		},
		{
			name:     "namespaceSelector",
			manifest: strings.Replace(manifest(labelMutation), "    resourceRules:", "    namespaceSelector: {matchExpressions: [{key: a, operator: Bogus}]}\n    resourceRules:", 1),
			want:     []string{"spec.matchConstraints.namespaceSelector"},
		},
		{
			name:     "subresource",
			manifest: strings.Replace(manifest(labelMutation), "resources: [pods]", "resources: [pods/status]", 1),
			want:     []string{"spec.matchConstraints.resourceRules[0].resources[0]", "subresources"},
		},
		{
			name:     "no mutations",
			manifest: manifest("  failurePolicy: Ignore\n"),
			want:     []string{"spec.mutations: Required value"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.manifest, tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, policy.ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestCustomResourceJSONPatch(t *testing.T) {
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	m := strings.NewReplacer(`apiGroups: [""]`, `apiGroups: [example.com]`, "resources: [pods]", "resources: [widgets]").Replace(manifest(`  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "add", path: "/spec/size", value: object.spec.size * 2}]'
`))
	p, err := load(t, m, policy.Options{Kinds: []schema.GroupVersionKind{widget}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Resources(); len(got) != 1 || got[0] != widget {
		t.Fatalf("Resources() = %v", got)
	}
	fn, err := p.MutateFunc(hooks.CreatePhysical)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	out, err := fn(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedInt64(out.(*unstructured.Unstructured).Object, "spec", "size")
	if got != 6 {
		t.Errorf("spec.size = %d, want 6", got)
	}
	if _, err := p.MutateFunc(hooks.DeletePhysical); err == nil {
		t.Error("MutateFunc(DeletePhysical) on a CREATE/UPDATE policy: no error")
	}
}

func TestHookTypes(t *testing.T) {
	p, err := load(t, manifest(labelMutation), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := corev1.SchemeGroupVersion.WithKind("Pod")
	if got := p.Resources(); len(got) != 1 || got[0] != pod {
		t.Fatalf("Resources() = %v", got)
	}
	got := p.HookTypes(pod)
	want := []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical, hooks.GetPhysical, hooks.CreateVirtual, hooks.UpdateVirtual, hooks.GetVirtual}
	if len(got) != len(want) {
		t.Fatalf("HookTypes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("HookTypes = %v, want %v", got, want)
		}
	}
}

// samplePod is the Pod the examples run on.
func samplePod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "team-a-prod",
			Labels: map[string]string{"app": "web", "mesh.example.com/inject": "true"},
		},
		Spec: corev1.PodSpec{
			PriorityClassName: "high",
			NodeSelector:      map[string]string{"kubernetes.io/os": "linux", "synchook.io/pool": "default"},
			Tolerations: []corev1.Toleration{
				{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/gpu", Operator: corev1.TolerationOpExists},
			},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers: []corev1.Container{
				{Name: "app", Image: "nginx", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}},
				{Name: "log", Image: "fluent-bit"},
			},
		},
	}
}

func runExample(t *testing.T, file string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	m, err := policy.ParseFile(filepath.Join("..", "..", "examples", "policies", file))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := p.MutateFunc(hooks.CreatePhysical)
	if err != nil {
		t.Fatal(err)
	}
	out, err := fn(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := out.(*corev1.Pod)
	if !ok {
		t.Fatalf("result is a %T", out)
	}
	if res.APIVersion != pod.APIVersion || res.Kind != pod.Kind {
		t.Errorf("TypeMeta changed: %v", res.TypeMeta)
	}
	return res
}

func TestExamples(t *testing.T) {
	t.Run("tolerations-add", func(t *testing.T) {
		out := runExample(t, "tolerations-add.yaml", samplePod())
		if n := len(out.Spec.Tolerations); n != 3 {
			t.Fatalf("%d tolerations: %v", n, out.Spec.Tolerations)
		}
		want := corev1.Toleration{Key: "synchook.io/tenant", Operator: corev1.TolerationOpEqual, Value: "team-a", Effect: corev1.TaintEffectNoSchedule}
		if out.Spec.Tolerations[2] != want || out.Spec.Tolerations[0].Key != "node-role.kubernetes.io/control-plane" {
			t.Errorf("tolerations = %v", out.Spec.Tolerations)
		}
		// Without tolerations the list is created; with the toleration already there nothing changes.
		pod := samplePod()
		pod.Spec.Tolerations = nil
		if out := runExample(t, "tolerations-add.yaml", pod); len(out.Spec.Tolerations) != 1 || out.Spec.Tolerations[0] != want {
			t.Errorf("tolerations = %v", out.Spec.Tolerations)
		}
		again := runExample(t, "tolerations-add.yaml", out)
		if len(again.Spec.Tolerations) != 3 {
			t.Errorf("second run: tolerations = %v", again.Spec.Tolerations)
		}
	})
	t.Run("toleration-remove", func(t *testing.T) {
		out := runExample(t, "toleration-remove.yaml", samplePod())
		if len(out.Spec.Tolerations) != 1 || out.Spec.Tolerations[0].Key != "example.com/gpu" {
			t.Errorf("tolerations = %v", out.Spec.Tolerations)
		}
	})
	t.Run("nodeselector-merge", func(t *testing.T) {
		out := runExample(t, "nodeselector-merge.yaml", samplePod())
		want := map[string]string{"kubernetes.io/os": "linux", "synchook.io/pool": "tenants", "topology.kubernetes.io/region": "eu-west-1"}
		if !equalMaps(out.Spec.NodeSelector, want) {
			t.Errorf("nodeSelector = %v, want %v", out.Spec.NodeSelector, want)
		}
		pod := samplePod()
		pod.Spec.NodeSelector = nil
		out = runExample(t, "nodeselector-merge.yaml", pod)
		if want := map[string]string{"synchook.io/pool": "tenants", "topology.kubernetes.io/region": "eu-west-1"}; !equalMaps(out.Spec.NodeSelector, want) {
			t.Errorf("nodeSelector = %v, want %v", out.Spec.NodeSelector, want)
		}
	})
	t.Run("priorityclassname-remove", func(t *testing.T) {
		pod := samplePod()
		pod.Spec.Priority, pod.Spec.PreemptionPolicy = ptr.To[int32](1000), ptr.To(corev1.PreemptLowerPriority)
		out := runExample(t, "priorityclassname-remove.yaml", pod)
		if out.Spec.PriorityClassName != "" || out.Spec.Priority != nil || out.Spec.PreemptionPolicy != nil {
			t.Errorf("priorityClassName = %q, priority = %v, preemptionPolicy = %v", out.Spec.PriorityClassName, out.Spec.Priority, out.Spec.PreemptionPolicy)
		}
		pod = samplePod()
		pod.Spec.PriorityClassName = ""
		if out := runExample(t, "priorityclassname-remove.yaml", pod); out != client.Object(pod) {
			t.Error("a Pod without priorityClassName was not returned as it was")
		}
	})
	t.Run("sidecar-initcontainer", func(t *testing.T) {
		out := runExample(t, "sidecar-initcontainer.yaml", samplePod())
		ic := out.Spec.InitContainers
		if len(ic) != 2 || ic[0].Name != "init" || ic[1].Name != "mesh-proxy" || ic[1].RestartPolicy == nil || *ic[1].RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("initContainers = %+v", ic)
		}
		pod := samplePod()
		delete(pod.Labels, "mesh.example.com/inject")
		if out := runExample(t, "sidecar-initcontainer.yaml", pod); len(out.Spec.InitContainers) != 1 {
			t.Errorf("without the label: initContainers = %+v", out.Spec.InitContainers)
		}
	})
	t.Run("label-from-variable", func(t *testing.T) {
		out := runExample(t, "label-from-variable.yaml", samplePod())
		if out.Labels["synchook.io/team"] != "team" || out.Labels["app"] != "web" {
			t.Errorf("labels = %v", out.Labels)
		}
	})
	t.Run("env-merge", func(t *testing.T) {
		out := runExample(t, "env-merge.yaml", samplePod())
		c := out.Spec.Containers
		if len(c) != 2 || len(c[0].Env) != 2 || c[0].Env[0].Name != "A" || c[0].Env[1] != (corev1.EnvVar{Name: "TZ", Value: "UTC"}) ||
			len(c[1].Env) != 1 || c[1].Image != "fluent-bit" {
			t.Errorf("containers = %+v", c)
		}
	})
}

// TestApplyConfigurationOnAtomicFields checks that, as in Kubernetes, an ApplyConfiguration
// may not set atomic lists and maps (tolerations, nodeSelector).
func TestApplyConfigurationOnAtomicFields(t *testing.T) {
	for field, expr := range map[string]string{
		"tolerations":  `Object{spec: Object.spec{tolerations: [Object.spec.tolerations{key: "a", operator: "Exists"}]}}`,
		"nodeSelector": `Object{spec: Object.spec{nodeSelector: {"a": "b"}}}`,
	} {
		p, err := load(t, manifest("  mutations:\n    - patchType: ApplyConfiguration\n      applyConfiguration:\n        expression: '"+expr+"'\n"), policy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		fn, _ := p.MutateFunc(hooks.CreatePhysical)
		_, err = fn(t.Context(), samplePod())
		if err == nil || !errors.Is(err, policy.ErrMutation) || !strings.Contains(err.Error(), "may not mutate atomic arrays, maps or structs: .spec."+field) {
			t.Errorf("%s: err = %v", field, err)
		}
	}
}

func TestFailurePolicyIgnore(t *testing.T) {
	p, err := load(t, manifest(`  failurePolicy: Ignore
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"x": object.metadata.labels["missing"]}}}'
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"y": "z"}}}'
`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := p.MutateFunc(hooks.UpdateVirtual)
	out, err := fn(t.Context(), samplePod())
	if err != nil {
		t.Fatal(err)
	}
	if l := out.GetLabels(); l["y"] != "z" || l["x"] != "" {
		t.Errorf("labels = %v", l)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
