package policy_test

import (
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policy"
)

func bindingOf(name, policyName string, ref *admissionregistrationv1.ParamRef) admissionregistrationv1.MutatingAdmissionPolicyBinding {
	return admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policyName, ParamRef: ref},
	}
}

func configMap(namespace, name string, lbls map[string]string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}}
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

// TestApplyConfigurationWithParams is Kubernetes' "apply configuration with params"
// (k8s.io/apiserver v0.37.0 pkg/admission/plugin/policy/mutating/compilation_test.go): the
// param ConfigMap's data.k1 "100" sets a Deployment's replicas from 1 to 100.
func TestApplyConfigurationWithParams(t *testing.T) {
	p, err := policy.Parse([]byte(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: d1}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: "Object{spec: Object.spec{replicas: int(params.data['k1'])}}"
`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := policy.CompileWithOptions(p, policy.Options{
		Bindings: []admissionregistrationv1.MutatingAdmissionPolicyBinding{bindingOf("b", "d1", &admissionregistrationv1.ParamRef{Name: "p", Namespace: "default"})},
		Params:   []*unstructured.Unstructured{configMap("default", "p", nil, map[string]any{"k1": "100"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := c.MutateFunc(hooks.CreatePhysical)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
	}
	out, err := fn(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	if got := *out.(*appsv1.Deployment).Spec.Replicas; got != 100 {
		t.Errorf("replicas = %d, want 100", got)
	}
}

// paramsPolicy appends params.data.v (or "null" when params is null) to the pod's
// annotation "seen", so the order and number of evaluations show.
const paramsPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: p}
spec:
  failurePolicy: %s
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods, namespaces, persistentvolumes]}
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{metadata: Object.metadata{annotations: {"seen":
          (has(object.metadata.annotations) && "seen" in object.metadata.annotations ? object.metadata.annotations["seen"] : "") +
          (params == null ? "null" : params.data["v"]) + ","}}}
`

func TestBindingsAndParams(t *testing.T) {
	params := []*unstructured.Unstructured{
		configMap("tenant", "b", map[string]string{"role": "tolerations"}, map[string]any{"v": "tenant/b"}),
		configMap("tenant", "a", map[string]string{"role": "tolerations"}, map[string]any{"v": "tenant/a"}),
		configMap("tenant", "c", map[string]string{"role": "other"}, map[string]any{"v": "tenant/c"}),
		configMap("platform", "a", map[string]string{"role": "tolerations"}, map[string]any{"v": "platform/a"}),
		configMap("other", "x", nil, map[string]any{"v": "other/x"}),
	}
	deny, allow := ptr.To(admissionregistrationv1.DenyAction), ptr.To(admissionregistrationv1.AllowAction)
	tolerations := &metav1.LabelSelector{MatchLabels: map[string]string{"role": "tolerations"}}
	cases := []struct {
		name          string
		failure       string
		refs          []*admissionregistrationv1.ParamRef // one binding each; nil: a binding without paramRef
		noBinding     bool
		clusterScoped bool   // the request is a PersistentVolume
		namespace     bool   // the request is the Namespace "tenant"
		want          string // the annotation "seen"; "" with wantErr
		wantErr       string
	}{
		{name: "a policy without bindings runs once with params null", noBinding: true, want: "null,"},
		{name: "a binding without paramRef runs once with params null", refs: []*admissionregistrationv1.ParamRef{nil}, want: "null,"},
		{name: "a binding by name and namespace uses that param", refs: []*admissionregistrationv1.ParamRef{{Name: "a", Namespace: "platform"}}, want: "platform/a,"},
		{name: "a namespaced param without namespace is looked up in the request's namespace", refs: []*admissionregistrationv1.ParamRef{{Name: "a"}}, want: "tenant/a,"},
		{name: "a selector with two matches runs once per param, by name", refs: []*admissionregistrationv1.ParamRef{{Selector: tolerations}}, want: "tenant/a,tenant/b,"},
		{name: "an empty selector selects every param of the namespace", refs: []*admissionregistrationv1.ParamRef{{Selector: &metav1.LabelSelector{}, Namespace: "tenant"}}, want: "tenant/a,tenant/b,tenant/c,"},
		{name: "bindings run in the order given", refs: []*admissionregistrationv1.ParamRef{{Name: "a", Namespace: "platform"}, nil, {Name: "x", Namespace: "other"}}, want: "platform/a,null,other/x,"},
		{name: "a param not found with Allow skips the binding", refs: []*admissionregistrationv1.ParamRef{{Name: "missing", ParameterNotFoundAction: allow}, {Name: "a"}}, want: "tenant/a,"},
		{name: "a param not found without an action skips the binding", refs: []*admissionregistrationv1.ParamRef{{Name: "missing"}}, want: ""},
		{name: "a param not found with Deny fails under failurePolicy Fail", refs: []*admissionregistrationv1.ParamRef{{Name: "missing", ParameterNotFoundAction: deny}}, wantErr: `no param of paramKind v1 ConfigMap in namespace tenant matches paramRef`},
		{name: "a param not found with Deny is skipped under failurePolicy Ignore", failure: "Ignore", refs: []*admissionregistrationv1.ParamRef{{Name: "missing", ParameterNotFoundAction: deny}, {Name: "b"}}, want: "tenant/b,"},
		{name: "a cluster-scoped request without paramRef.namespace fails under Fail", clusterScoped: true, refs: []*admissionregistrationv1.ParamRef{{Name: "a"}}, wantErr: "paramRef.namespace is empty and the request is cluster-scoped"},
		{name: "a cluster-scoped request without paramRef.namespace is skipped under Ignore", failure: "Ignore", clusterScoped: true, refs: []*admissionregistrationv1.ParamRef{{Name: "a"}}, want: ""},
		{name: "a cluster-scoped request with paramRef.namespace uses it", clusterScoped: true, refs: []*admissionregistrationv1.ParamRef{{Name: "a", Namespace: "platform"}}, want: "platform/a,"},
		// kube-apiserver's admission namespace of a Namespace request is its own name
		// (TestParamsConformance holds it to the apiserver's).
		{name: "a Namespace without paramRef.namespace looks in its own name", namespace: true, refs: []*admissionregistrationv1.ParamRef{{Name: "a"}}, want: "tenant/a,"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			failure := tc.failure
			if failure == "" {
				failure = "Fail"
			}
			p, err := policy.Parse([]byte(strings.Replace(paramsPolicy, "%s", failure, 1)))
			if err != nil {
				t.Fatal(err)
			}
			opts := policy.Options{Params: params}
			for i, r := range tc.refs {
				opts.Bindings = append(opts.Bindings, bindingOf(string(rune('a'+i)), "p", r))
			}
			c, err := policy.CompileWithOptions(p, opts)
			if err != nil {
				t.Fatal(err)
			}
			fn, err := c.MutateFunc(hooks.CreatePhysical)
			if err != nil {
				t.Fatal(err)
			}
			var in client.Object = &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant"}}
			if tc.clusterScoped {
				in = &corev1.PersistentVolume{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"}, ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}
			}
			if tc.namespace {
				in = &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}
			}
			out, err := fn(t.Context(), in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, policy.ErrParamConfig) {
					t.Fatalf("error = %v, want one with %q wrapping ErrParamConfig", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out.GetAnnotations()["seen"]; got != tc.want {
				t.Errorf("seen = %q, want %q", got, tc.want)
			}
		})
	}
}
