package policy_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policy"
)

// As kube-apiserver's namespace matcher: a Namespace is judged by its own labels, another
// cluster-scoped object is never excluded (the conformance test holds the same cases to a real
// apiserver).
func TestNamespaceSelectorJudgesANamespaceByItsOwnLabels(t *testing.T) {
	p, err := load(t, nsSelectorPolicy, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		typ  hooks.HookType
		obj  client.Object
		want bool
	}{
		{"a Namespace labelled env=prod is mutated", hooks.CreatePhysical, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"env": "prod"}}}, true},
		{"a Namespace labelled env=dev is not", hooks.CreatePhysical, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"env": "dev"}}}, false},
		{"an unlabelled Namespace is not", hooks.UpdatePhysical, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, false},
		{"a PriorityClass is never excluded", hooks.CreatePhysical, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := p.MutateFunc(tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			out, err := fn(t.Context(), tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.GetLabels()["mutated"] == "yes"; got != tc.want {
				t.Errorf("mutated = %v, want %v (labels %v)", got, tc.want, out.GetLabels())
			}
		})
	}
}

// As kube-apiserver's object matcher: an UPDATE is selected when the object or the old object
// matches objectSelector (a label the update removes still selects it).
func TestObjectSelectorMatchesTheOldObjectOnAnUpdate(t *testing.T) {
	m := manifest("    objectSelector: {matchLabels: {team: a}}\n" + labelMutation)
	p, err := load(t, m, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := p.MutateFunc(hooks.UpdatePhysical)
	if err != nil {
		t.Fatal(err)
	}
	old := newPod("default")
	old.Labels = map[string]string{"team": "a"}
	oldJSON, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		withOld bool
		want    bool
	}{
		{"with the old object, labelled team=a", true, true},
		{"without an old object", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.withOld {
				ctx = hooks.WithOldObject(ctx, oldJSON)
			}
			out, err := fn(ctx, newPod("default"))
			if err != nil {
				t.Fatal(err)
			}
			if got := out.GetLabels()["a"] == "b"; got != tc.want {
				t.Errorf("mutated = %v, want %v", got, tc.want)
			}
		})
	}
}
