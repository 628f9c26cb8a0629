package policy_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policy"
)

// nsSelectorPolicy labels Namespaces and PriorityClasses (a cluster-scoped kind) in namespaces
// labelled env=prod: kube-apiserver judges a Namespace request by the Namespace's own labels and
// never excludes another cluster-scoped object.
const nsSelectorPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: ns-selector
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {env: prod}}
    resourceRules:
      - apiGroups: [""]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [namespaces]
      - apiGroups: [scheduling.k8s.io]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [priorityclasses]
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"mutated": "yes"}}}'
`

// testNamespaceSelectorOnClusterScopedObjects holds synchook's namespaceSelector to the
// apiserver's on Namespaces (matching and not, created and updated) and on a cluster-scoped
// object of another kind: the label the policy adds is there in both or in neither.
func testNamespaceSelectorOnClusterScopedObjects(ctx context.Context, t *testing.T, c client.Client) {
	p, err := policy.Parse([]byte(nsSelectorPolicy))
	must(t, err)
	compiled, err := policy.Compile(p, nil)
	must(t, err)
	p.Spec.ReinvocationPolicy = admissionregistrationv1.NeverReinvocationPolicy
	must(t, c.Create(ctx, p))
	must(t, c.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: p.Name,
			MatchResources: &admissionregistrationv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"case": "ns-selector"}},
			},
		},
	}))
	nsOf := func(name, env string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"case": "ns-selector", "env": env}}}
	}
	for { // until the apiserver has the policy
		probe := nsOf("ns-selector-probe", "prod")
		err := c.Create(ctx, probe, client.DryRunAll)
		if err == nil && probe.Labels["mutated"] == "yes" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the namespaceSelector policy never took effect (last error: %v)", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	stored := nsOf("ns-selector-stored", "dev")
	must(t, c.Create(ctx, stored))

	for _, tc := range []struct {
		name   string
		obj    client.Object
		update bool
	}{
		{"a Namespace labelled env=prod is mutated", nsOf("ns-selector-prod", "prod"), false},
		{"a Namespace labelled env=dev is not", nsOf("ns-selector-dev", "dev"), false},
		{"a Namespace updated to env=prod is judged by its new labels", func() client.Object {
			o := stored.DeepCopy()
			o.Labels["env"] = "prod"
			return o
		}(), true},
		{"a PriorityClass, cluster-scoped, is never excluded", &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: "ns-selector-pc", Labels: map[string]string{"case": "ns-selector"}}, Value: 10,
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := tc.obj.DeepCopyObject().(client.Object)
			typ := hooks.CreatePhysical
			if tc.update {
				typ = hooks.UpdatePhysical
				must(t, c.Update(ctx, server, client.DryRunAll))
			} else {
				must(t, c.Create(ctx, server, client.DryRunAll))
			}
			fn, err := compiled.MutateFunc(typ)
			must(t, err)
			ours, err := fn(ctx, tc.obj.DeepCopyObject().(client.Object))
			must(t, err)
			want := server.GetLabels()["mutated"]
			got := ours.GetLabels()["mutated"]
			if got != want {
				t.Errorf("label mutated: apiserver %q, synchook %q", want, got)
			}
			// the namespace registry's own label, set after admission
			delete(server.GetLabels(), corev1.LabelMetadataName)
			delete(ours.GetLabels(), corev1.LabelMetadataName)
			if !reflect.DeepEqual(server.GetLabels(), ours.GetLabels()) {
				t.Errorf("labels differ\napiserver: %v\nsynchook:  %v", server.GetLabels(), ours.GetLabels())
			}
		})
	}
}
