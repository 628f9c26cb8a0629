package policy_test

import (
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/policy"
)

// TestBindingMatchResources holds a binding's spec.matchResources to kube-apiserver's meaning
// (generic/policy_matcher.go BindingMatches): a binding applies to a request only when the
// policy's matchConstraints and the binding's matchResources both match it, by the same rule
// (namespaceSelector, objectSelector, resourceRules, excludeResourceRules); a binding that
// does not apply runs no evaluation, and a policy none of whose bindings applies does not run.
func TestBindingMatchResources(t *testing.T) {
	params := []*unstructured.Unstructured{
		configMap("gold", "a", nil, map[string]any{"v": "gold/a"}),
		configMap("free", "a", nil, map[string]any{"v": "free/a"}),
	}
	src := namespaces.Source{Lookup: namespaces.Static{
		"gold": {ObjectMeta: metav1.ObjectMeta{Name: "gold", Labels: map[string]string{"tier": "gold"}}},
		"free": {ObjectMeta: metav1.ObjectMeta{Name: "free", Labels: map[string]string{"tier": "free"}}},
	}}
	podRule := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	webOnly := podRule
	webOnly.ResourceNames = []string{"web"}
	gold := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	byName := &admissionregistrationv1.ParamRef{Name: "a"}
	type bind struct {
		ref   *admissionregistrationv1.ParamRef
		match *admissionregistrationv1.MatchResources
	}
	cases := []struct {
		name      string
		bindings  []bind
		namespace string // of the Pod; "" for the Namespace object "gold"
		podLabels map[string]string
		source    *namespaces.Source // nil: src
		want      string             // the annotation "seen"
		wantErr   string
	}{
		{name: "a binding without matchResources applies wherever the policy does", bindings: []bind{{ref: byName}}, namespace: "free", want: "free/a,"},
		{name: "a binding whose namespaceSelector matches the request's namespace applies", bindings: []bind{{ref: byName, match: &admissionregistrationv1.MatchResources{NamespaceSelector: gold}}}, namespace: "gold", want: "gold/a,"},
		{name: "a binding whose namespaceSelector excludes the request's namespace runs no evaluation", bindings: []bind{{ref: byName, match: &admissionregistrationv1.MatchResources{NamespaceSelector: gold}}, {}}, namespace: "free", want: "null,"},
		{name: "a policy none of whose bindings applies does not run", bindings: []bind{{match: &admissionregistrationv1.MatchResources{NamespaceSelector: gold}}}, namespace: "free", want: ""},
		{name: "a binding's namespaceSelector judges a Namespace by its own labels", bindings: []bind{{match: &admissionregistrationv1.MatchResources{NamespaceSelector: gold}}}, namespace: "", want: "null,"},
		{name: "a binding whose objectSelector excludes the object runs no evaluation", bindings: []bind{{ref: byName, match: &admissionregistrationv1.MatchResources{ObjectSelector: app}}, {}}, namespace: "gold", want: "null,"},
		{name: "a binding whose objectSelector matches the object applies", bindings: []bind{{ref: byName, match: &admissionregistrationv1.MatchResources{ObjectSelector: app}}}, namespace: "gold", podLabels: map[string]string{"app": "web"}, want: "gold/a,"},
		{name: "a binding whose excludeResourceRules exclude the object runs no evaluation", bindings: []bind{{match: &admissionregistrationv1.MatchResources{ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{podRule}}}, {ref: byName}}, namespace: "gold", want: "gold/a,"},
		{name: "a binding whose resourceRules select another kind runs no evaluation", bindings: []bind{{match: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{podRule}}}}, namespace: "", want: ""},
		{name: "a binding whose resourceRules select the object by name applies", bindings: []bind{{ref: byName, match: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{webOnly}}}}, namespace: "gold", want: "gold/a,"},
		{name: "bindings that apply keep their order", bindings: []bind{{}, {ref: byName, match: &admissionregistrationv1.MatchResources{NamespaceSelector: gold}}, {ref: &admissionregistrationv1.ParamRef{Name: "a", Namespace: "free"}}}, namespace: "gold", want: "null,gold/a,free/a,"},
		{name: "a binding's namespaceSelector with no namespace source fails naming the binding", bindings: []bind{{match: &admissionregistrationv1.MatchResources{NamespaceSelector: gold}}}, namespace: "gold", source: &namespaces.Source{}, wantErr: `binding "b0": spec.matchResources.namespaceSelector`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse([]byte(strings.Replace(paramsPolicy, "%s", "Fail", 1)))
			if err != nil {
				t.Fatal(err)
			}
			opts := policy.Options{Params: params}
			for i, b := range tc.bindings {
				mb := bindingOf("b"+string(rune('0'+i)), "p", b.ref)
				mb.Spec.MatchResources = b.match
				opts.Bindings = append(opts.Bindings, mb)
			}
			c, err := policy.CompileWithOptions(p, opts)
			if err != nil {
				t.Fatal(err)
			}
			fn, err := c.MutateFunc(hooks.CreatePhysical)
			if err != nil {
				t.Fatal(err)
			}
			var in client.Object = &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: tc.namespace, Labels: tc.podLabels}}
			if tc.namespace == "" {
				in = &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "gold", Labels: map[string]string{"tier": "gold"}}}
			}
			s := src
			if tc.source != nil {
				s = *tc.source
			}
			out, err := fn(namespaces.WithSource(t.Context(), s), in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, policy.ErrMutation) {
					t.Fatalf("error = %v, want one with %q wrapping ErrMutation", err, tc.wantErr)
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

// TestBindingMatchResourcesRefusedAtLoad: a binding's matchResources is checked at load as the
// policy's matchConstraints are, each problem naming its field.
func TestBindingMatchResourcesRefusedAtLoad(t *testing.T) {
	cases := []struct {
		name  string
		match admissionregistrationv1.MatchResources
		want  string
	}{
		{name: "a resource no kind has is refused", match: admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"podz"}},
		}}}}, want: "bindings[0].spec.matchResources.resourceRules[0].resources[0]"},
		{name: "a bad namespaceSelector is refused", match: admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}}, want: "bindings[0].spec.matchResources.namespaceSelector"},
		{name: "an unknown matchPolicy is refused", match: admissionregistrationv1.MatchResources{MatchPolicy: new(admissionregistrationv1.MatchPolicyType("Close"))}, want: "bindings[0].spec.matchResources.matchPolicy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse([]byte(strings.Replace(paramsPolicy, "%s", "Fail", 1)))
			if err != nil {
				t.Fatal(err)
			}
			b := bindingOf("b", "p", nil)
			b.Spec.MatchResources = &tc.match
			_, err = policy.CompileWithOptions(p, policy.Options{Bindings: []admissionregistrationv1.MutatingAdmissionPolicyBinding{b}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("error = %v, want one naming %s", err, tc.want)
			}
		})
	}
}
