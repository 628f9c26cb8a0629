package policy_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policy"
	"github.com/synchook/synchook/internal/testenv"
)

// paramsPolicyTemplate is the policy of every params conformance case: ConfigMaps are its
// params; it selects CREATEs of Pods and ClusterRoles and CREATEs and UPDATEs of Namespaces
// labelled case=<id> (so each case's request meets its own policy only) and runs the case's
// mutation.
const paramsPolicyTemplate = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: %s
spec:
  failurePolicy: %s
  reinvocationPolicy: Never
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    objectSelector: {matchLabels: {case: %s}}
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [namespaces]}
      - {apiGroups: [rbac.authorization.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [clusterroles]}
%s`

// labelFromParam sets the label params.data.key to params.data.value: a granular map merge, so
// two params give two labels in either order.
const labelFromParam = `  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {params.data.key: params.data.value}}}'
`

// labelsFromParamAndRequest is labelFromParam and then the label request-namespace set to
// CEL's request.namespace (a Namespace's own name there).
const labelsFromParamAndRequest = labelFromParam + `    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"request-namespace": request.namespace}}}'
`

// tolerationFromParam appends a toleration of key params.data.key and value params.data.value.
const tolerationFromParam = `  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "add", path: "/spec/tolerations/-", value: Object.spec.tolerations{
            key: params.data.key, operator: "Equal", value: params.data.value, effect: "NoSchedule"}}]
`

// platformNS holds the params that bindings name with paramRef.namespace (as a platform team
// keeps them); every case's own namespace holds decoys of the same names and labels.
const platformNS = "params-platform"

// paramCM is a param ConfigMap; namespace "" is the case's own namespace.
type paramCM struct {
	namespace, name string
	labels          map[string]string
	key, value      string
}

// paramsCase is one policy, one binding and one request: synchook's result must be the
// apiserver's.
type paramsCase struct {
	name string
	id   string // the case's namespace, policy and binding name, and case label
	// failure is the policy's failurePolicy ("" is Fail); mutation labelFromParam or
	// labelsFromParamAndRequest or tolerationFromParam.
	failure, mutation string
	ref               admissionregistrationv1.ParamRef // the binding's paramRef
	params            []paramCM                        // created before the policies
	// request is the kind of the request object: "" a Pod in the case's namespace, or the
	// cluster-scoped "ClusterRole" or "Namespace" (a new one named params-req-<id>).
	request string
	// update makes the request an UPDATE of the case's own Namespace (request "Namespace"):
	// labelled case=<id>, dry run.
	update bool
	// changed says the result must differ from the request object (else it must equal it).
	changed bool
	// refused is the part of the apiserver's refusal the case expects, and why the part of
	// synchook's (an error wrapping policy.ErrParamConfig) that says the same. "": both let
	// the request through.
	refused, why string
}

func paramsCases() []paramsCase {
	deny, allow := ptr.To(admissionregistrationv1.DenyAction), ptr.To(admissionregistrationv1.AllowAction)
	teamLabels := &metav1.LabelSelector{MatchLabels: map[string]string{"role": "team-labels"}}
	return []paramsCase{
		{
			name: "a param by name and namespace adds its toleration", id: "by-name", mutation: tolerationFromParam,
			ref:     admissionregistrationv1.ParamRef{Name: "tolerations", Namespace: platformNS, ParameterNotFoundAction: deny},
			params:  []paramCM{{name: "tolerations", key: "pool", value: "decoy"}},
			changed: true,
		},
		{
			name: "a selector with two matches adds both labels", id: "selector", mutation: labelFromParam,
			ref:     admissionregistrationv1.ParamRef{Selector: teamLabels, Namespace: platformNS, ParameterNotFoundAction: deny},
			params:  []paramCM{{name: "team-decoy", labels: map[string]string{"role": "team-labels"}, key: "decoy", value: "yes"}},
			changed: true,
		},
		{
			name: "a selector without namespace selects the request's namespace", id: "selector-default-ns", mutation: labelFromParam,
			ref: admissionregistrationv1.ParamRef{Selector: teamLabels, ParameterNotFoundAction: deny},
			params: []paramCM{
				{name: "team-x", labels: map[string]string{"role": "team-labels"}, key: "team-x", value: "here"},
				{name: "team-y", labels: map[string]string{"role": "team-labels"}, key: "team-y", value: "here"},
				{name: "other", labels: map[string]string{"role": "other"}, key: "other", value: "no"},
			},
			changed: true,
		},
		{
			name: "a param by name without namespace is the one in the request's namespace", id: "default-ns", mutation: tolerationFromParam,
			ref:     admissionregistrationv1.ParamRef{Name: "tolerations", ParameterNotFoundAction: deny},
			params:  []paramCM{{name: "tolerations", key: "pool", value: "from-request-namespace"}},
			changed: true,
		},
		{
			name: "a param not found with Allow leaves the request unchanged", id: "allow", mutation: labelFromParam,
			ref: admissionregistrationv1.ParamRef{Name: "missing", Namespace: platformNS, ParameterNotFoundAction: allow},
		},
		{
			name: "a param not found with Deny under failurePolicy Fail refuses the request", id: "deny-fail", mutation: labelFromParam,
			ref:     admissionregistrationv1.ParamRef{Name: "missing", Namespace: platformNS, ParameterNotFoundAction: deny},
			refused: "no params found for policy binding with `Deny` parameterNotFoundAction",
			why:     "matches paramRef (parameterNotFoundAction Deny)",
		},
		{
			name: "a param not found with Deny under failurePolicy Ignore leaves the request unchanged", id: "deny-ignore", failure: "Ignore", mutation: labelFromParam,
			ref: admissionregistrationv1.ParamRef{Name: "missing", Namespace: platformNS, ParameterNotFoundAction: deny},
		},
		{
			name: "a cluster-scoped request without paramRef.namespace under Fail is refused", id: "clusterrole-fail", mutation: labelFromParam, request: "ClusterRole",
			ref:     admissionregistrationv1.ParamRef{Name: "labels", ParameterNotFoundAction: allow},
			refused: "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources",
			why:     "paramRef.namespace is empty and the request is cluster-scoped",
		},
		{
			name: "a cluster-scoped request without paramRef.namespace under Ignore is unchanged", id: "clusterrole-ignore", failure: "Ignore", mutation: labelFromParam, request: "ClusterRole",
			ref: admissionregistrationv1.ParamRef{Name: "labels", ParameterNotFoundAction: allow},
		},
		{
			name: "a cluster-scoped request with paramRef.namespace uses it", id: "clusterrole-ns", mutation: labelFromParam, request: "ClusterRole",
			ref:     admissionregistrationv1.ParamRef{Name: "labels", Namespace: platformNS, ParameterNotFoundAction: deny},
			changed: true,
		},
		// kube-apiserver gives a request on a Namespace the Namespace's own name as its
		// namespace, and CollectParams defaults paramRef.namespace to it: not the configuration
		// error of another cluster-scoped kind.
		{
			name: "a new Namespace without paramRef.namespace looks in its own name (none there: Deny refuses)", id: "namespace-create", mutation: labelFromParam, request: "Namespace",
			ref:     admissionregistrationv1.ParamRef{Name: "labels", ParameterNotFoundAction: deny},
			refused: "no params found for policy binding with `Deny` parameterNotFoundAction",
			why:     "matches paramRef (parameterNotFoundAction Deny)",
		},
		{
			name: "an updated Namespace without paramRef.namespace uses the param in that Namespace", id: "namespace-update", mutation: labelsFromParamAndRequest, request: "Namespace", update: true,
			ref:     admissionregistrationv1.ParamRef{Name: "labels", ParameterNotFoundAction: deny},
			params:  []paramCM{{name: "labels", key: "from", value: "own-namespace"}},
			changed: true,
		},
	}
}

// platformParams are the params in platformNS.
var platformParams = []paramCM{
	{namespace: platformNS, name: "tolerations", key: "pool", value: "gpu"},
	{namespace: platformNS, name: "team-a", labels: map[string]string{"role": "team-labels"}, key: "team-a", value: "yes"},
	{namespace: platformNS, name: "team-b", labels: map[string]string{"role": "team-labels"}, key: "team-b", value: "yes"},
	{namespace: platformNS, name: "team-c", labels: map[string]string{"role": "other"}, key: "team-c", value: "no"},
	{namespace: platformNS, name: "labels", key: "from", value: "platform"},
}

// TestParamsConformance holds synchook's params and bindings to kube-apiserver's: the same
// policy, MutatingAdmissionPolicyBinding and param ConfigMaps are created in the apiserver
// (envtest) and given to synchook (policy.Options: the binding, and every ConfigMap the
// apiserver holds as the params), and the same request is created (dry run) there and mutated
// by synchook.
//
// How objects are compared: the request object X is what the apiserver returns from a dry-run
// create of the object without its case label (so no policy selects it: defaulted, with what
// the admission plugins before policies add), with the label put back; S is the dry-run
// create of X, O synchook's result on X. S and O must be equal ignoring server-set metadata
// (uid, resourceVersion, creationTimestamp, managedFields, generation), status and, of a Pod,
// spec.priority and spec.preemptionPolicy. The mutations touch labels and tolerations only,
// which the apiserver does not default again after the policy. When the apiserver refuses the
// request, synchook must fail with an error wrapping policy.ErrParamConfig.
func TestParamsConformance(t *testing.T) {
	c := apiServerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// The sentinel: a selector binding in its own namespace, created after every case's
	// policy and binding. Once it acts on a probe Pod, the apiserver has the others and its
	// ConfigMap informer has synced.
	sentinel := paramsCase{
		id: "sentinel", mutation: labelFromParam,
		ref:    admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
		params: []paramCM{{name: "sentinel", key: "sentinel", value: "active"}},
	}
	cases := paramsCases()
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}}))
	for _, tc := range append(cases, sentinel) {
		ns := "params-" + tc.id
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		must(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))
		for _, p := range tc.params {
			if p.namespace == "" {
				p.namespace = ns
			}
			createParam(ctx, t, c, p)
		}
	}
	for _, p := range platformParams {
		createParam(ctx, t, c, p)
	}
	// synchook's params: every ConfigMap of the apiserver, as it returns them.
	cms := &unstructured.UnstructuredList{}
	cms.SetAPIVersion("v1")
	cms.SetKind("ConfigMapList")
	must(t, c.List(ctx, cms))
	params := make([]*unstructured.Unstructured, len(cms.Items))
	for i := range cms.Items {
		params[i] = &cms.Items[i]
		params[i].SetAPIVersion("v1")
		params[i].SetKind("ConfigMap")
	}

	compiled := make([]*policy.Policy, len(cases))
	for i, tc := range append(cases, sentinel) {
		p, b := paramsPolicyAndBinding(t, tc)
		must(t, c.Create(ctx, p.DeepCopy()))
		must(t, c.Create(ctx, b.DeepCopy()))
		if i == len(cases) {
			break
		}
		var err error
		if compiled[i], err = policy.CompileWithOptions(p, policy.Options{
			Bindings: []admissionregistrationv1.MutatingAdmissionPolicyBinding{*b},
			Params:   params,
		}); err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
	}
	if err := testenv.Poll(ctx, func() error {
		probe := paramsRequest(sentinel)
		probe.SetName("probe")
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if got := probe.GetLabels()["sentinel"]; got != "active" {
			return fmt.Errorf("probe label sentinel = %q, want active", got)
		}
		return nil
	}); err != nil {
		t.Fatalf("the sentinel policy never took effect: %v", err)
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// X: the request object as the apiserver defaults it, before any policy.
			x, typ := paramsRequest(tc), hooks.CreatePhysical
			if tc.update {
				typ = hooks.UpdatePhysical
				must(t, c.Get(ctx, client.ObjectKeyFromObject(x), x))
			} else {
				delete(x.GetLabels(), "case")
				if err := c.Create(ctx, x, client.DryRunAll); err != nil {
					t.Fatalf("baseline dry-run: %v", err)
				}
				cleanObject(x)
			}
			if x.GetLabels() == nil {
				x.SetLabels(map[string]string{})
			}
			x.GetLabels()["case"] = tc.id
			s := x.DeepCopyObject().(client.Object)
			var serverErr error
			if tc.update {
				serverErr = c.Update(ctx, s, client.DryRunAll)
			} else {
				serverErr = c.Create(ctx, s, client.DryRunAll)
			}
			fn, err := compiled[i].MutateFunc(typ)
			must(t, err)
			o, oursErr := fn(ctx, x.DeepCopyObject().(client.Object))
			switch {
			case serverErr != nil && oursErr != nil:
				t.Logf("both refuse:\n  apiserver: %v\n  synchook:  %v", serverErr, oursErr)
				if tc.refused == "" || !strings.Contains(serverErr.Error(), tc.refused) {
					t.Errorf("the apiserver refuses, not as expected (%q): %v", tc.refused, serverErr)
				}
				if !errors.Is(oursErr, policy.ErrParamConfig) || !strings.Contains(oursErr.Error(), tc.why) {
					t.Errorf("synchook refuses, not as expected (%q, wrapping ErrParamConfig): %v", tc.why, oursErr)
				}
				return
			case serverErr != nil:
				t.Fatalf("the apiserver refuses, synchook does not:\n  apiserver: %v\n  synchook result: %s", serverErr, toJSON(t, comparableObject(t, o)))
			case oursErr != nil:
				t.Fatalf("synchook refuses, the apiserver does not:\n  synchook: %v\n  apiserver result: %s", oursErr, toJSON(t, comparableObject(t, s)))
			case tc.refused != "":
				t.Errorf("both let the request through; want the apiserver to refuse it (%q)", tc.refused)
			}
			want, got := comparableObject(t, s), comparableObject(t, o)
			if !reflect.DeepEqual(want, got) {
				t.Errorf("results differ\napiserver: %s\nsynchook:  %s", toJSON(t, want), toJSON(t, got))
			}
			if changed := !reflect.DeepEqual(comparableObject(t, x), want); changed != tc.changed {
				t.Errorf("the apiserver's result differs from the request: %t, want %t (%s)", changed, tc.changed, toJSON(t, want))
			}
		})
	}
}

// createParam creates the param ConfigMap p.
func createParam(ctx context.Context, t *testing.T, c client.Client, p paramCM) {
	t.Helper()
	must(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: p.labels},
		Data:       map[string]string{"key": p.key, "value": p.value},
	}))
}

// paramsPolicyAndBinding returns tc's policy and its binding, both named tc.id.
func paramsPolicyAndBinding(t *testing.T, tc paramsCase) (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	t.Helper()
	failure := tc.failure
	if failure == "" {
		failure = "Fail"
	}
	p, err := policy.Parse(fmt.Appendf(nil, paramsPolicyTemplate, tc.id, failure, tc.id, tc.mutation))
	must(t, err)
	return p, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: tc.id},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: tc.id, ParamRef: tc.ref.DeepCopy()},
	}
}

// paramsRequest returns tc's request object, labelled case=tc.id.
func paramsRequest(tc paramsCase) client.Object {
	meta := metav1.ObjectMeta{Name: "params-req-" + tc.id, Labels: map[string]string{"case": tc.id, "app": "web"}}
	switch tc.request {
	case "ClusterRole":
		return &rbacv1.ClusterRole{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	case "Namespace":
		if tc.update {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "params-" + tc.id}}
		}
		return &corev1.Namespace{ObjectMeta: meta}
	}
	meta.Name, meta.Namespace = "web", "params-"+tc.id
	return &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		Tolerations:                  []corev1.Toleration{{Key: "example.com/gpu", Operator: corev1.TolerationOpExists}},
		Containers:                   []corev1.Container{{Name: "app", Image: "nginx"}},
	}}
}

// cleanObject drops what the apiserver sets on create, so the object can be sent again.
func cleanObject(o client.Object) {
	o.SetUID("")
	o.SetResourceVersion("")
	o.SetCreationTimestamp(metav1.Time{})
	o.SetManagedFields(nil)
	o.SetGeneration(0)
	switch o := o.(type) {
	case *corev1.Pod:
		o.Status = corev1.PodStatus{}
	case *corev1.Namespace:
		o.Status = corev1.NamespaceStatus{}
	}
}

// comparableObject returns o without what the comparison ignores, as JSON-like maps.
func comparableObject(t *testing.T, o client.Object) map[string]any {
	t.Helper()
	o = o.DeepCopyObject().(client.Object)
	cleanObject(o)
	if p, ok := o.(*corev1.Pod); ok {
		p.Spec.Priority, p.Spec.PreemptionPolicy = nil, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	must(t, err)
	delete(m, "apiVersion") // what the client leaves there differs between calls
	delete(m, "kind")
	return m
}
