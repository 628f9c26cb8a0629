package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	_ "github.com/synchook/synchook/config/policy" // policy: hooks (MutatingAdmissionPolicy, CEL)
	"github.com/synchook/synchook/internal/testenv"
)

// hostMutatesLabel labels a storage oracle case's two namespaces with the name of the host's
// MutatingAdmissionPolicy (hostPolicies) that acts on them (storedCase.hostMutates): bound by
// namespaceSelector, it leaves every other case's namespaces alone.
const hostMutatesLabel = "host-mutates"

// The resource rules of the policies below: Pods, and the Widget custom resource.
const (
	podRule    = `{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}`
	widgetRule = `{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [widgets]}`
)

// admissionPolicy is a MutatingAdmissionPolicy manifest named name, on the objects of rule, that
// applies the JSONPatch of patch to those that match condition (the guard that makes it add
// only what is missing, as synchook's idempotency check and a real host policy want).
func admissionPolicy(name, rule, condition, patch string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: %s}
spec:
  reinvocationPolicy: Never
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [%s]
  matchConditions: [{name: not-yet, expression: %q}]
  mutations: [{patchType: JSONPatch, jsonPatch: {expression: %q}}]
`, name, rule, condition, patch)
}

// policyHook is a synchook config of one policy: hook, the MutatingAdmissionPolicy of
// admissionPolicy, on the CreatePhysical and UpdatePhysical writes of resource.
func policyHook(resource, rule, condition, patch string) string {
	manifest := admissionPolicy("created", rule, condition, patch)
	return fmt.Sprintf(`hooks:
  - name: created
    resources: [%s]
    types: [CreatePhysical, UpdatePhysical]
    policy:
      %s
`, resource, strings.ReplaceAll(strings.TrimSpace(manifest), "\n", "\n      "))
}

// createdOrAdded is a JSONPatch expression that adds value as member key of the map at parent
// (a JSON pointer), making the map when there is none: has is the CEL test of the map, key is
// escaped for the pointer.
func createdOrAdded(has, parent, key, value string) string {
	escaped := strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
	return fmt.Sprintf(`has(%s) ? [JSONPatch{op: "add", path: "%s/%s", value: %s}] : [JSONPatch{op: "add", path: "%s", value: {"%s": %s}}]`,
		has, parent, escaped, value, parent, key, value)
}

// unlabelledPod is pod without metadata.labels.
func unlabelledPod(spec string) string {
	return strings.Replace(pod(spec), "metadata: {name: web, labels: {app: web}}", "metadata: {name: web}", 1)
}

// createdParentCases are the storage oracle's shapes in which the hooks create a map or list
// (nothing was there: an undo entry with no Original) and the host itself adds to it — a host
// MutatingAdmissionPolicy, DefaultTolerationSeconds, a custom resource's structural defaults:
// the read takes back what the hooks wrote and keeps what the host added, and so equals what
// the same apiserver stores of the object the syncer sent (undo.takeBack).
var createdParentCases = []storedCase{
	{
		name: "Pod without a securityContext: a policy makes one with runAsNonRoot, a host policy adds seccompProfile into it",
		config: policyHook(`{apiVersion: v1, kind: Pod}`, podRule,
			`!has(object.spec.securityContext) || !has(object.spec.securityContext.runAsNonRoot)`,
			createdOrAdded("object.spec.securityContext", "/spec/securityContext", "runAsNonRoot", "true")),
		object: pod("  tolerations:" + defaultTolerations), update: `{"metadata":{"labels":{"rev":"2"}}}`, hostMutates: "seccomp",
	},
	{
		name: "Pod without a nodeSelector: a policy makes one with disktype, a host policy adds kubernetes.io/os into it",
		config: policyHook(`{apiVersion: v1, kind: Pod}`, podRule,
			`!has(object.spec.nodeSelector) || !("disktype" in object.spec.nodeSelector)`,
			createdOrAdded("object.spec.nodeSelector", "/spec/nodeSelector", "disktype", `"ssd"`)),
		object: pod("  tolerations:" + defaultTolerations), update: `{"metadata":{"labels":{"rev":"2"}}}`, hostMutates: "os",
	},
	{
		// The sent Pod has no tolerations (a tenant apiserver without DefaultTolerationSeconds):
		// the host's plugin adds its two beside the policy's, on both sides.
		name: "Pod without tolerations: a policy adds dedicated=tenant:NoSchedule, the host's DefaultTolerationSeconds adds its two",
		config: policyHook(`{apiVersion: v1, kind: Pod}`, podRule,
			`!has(object.spec.tolerations) || !object.spec.tolerations.exists(t, has(t.key) && t.key == "dedicated")`,
			`has(object.spec.tolerations) ? [JSONPatch{op: "add", path: "/spec/tolerations/-", value: {"key": "dedicated", "value": "tenant", "effect": "NoSchedule"}}] `+
				`: [JSONPatch{op: "add", path: "/spec/tolerations", value: [{"key": "dedicated", "value": "tenant", "effect": "NoSchedule"}]}]`),
		object: pod(""), update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
	{
		name: "Pod without labels: a policy labels it team=a, a host policy adds a label",
		config: policyHook(`{apiVersion: v1, kind: Pod}`, podRule,
			`!has(object.metadata.labels) || !("team" in object.metadata.labels)`,
			createdOrAdded("object.metadata.labels", "/metadata/labels", "team", `"a"`)),
		object: unlabelledPod("  tolerations:" + defaultTolerations), update: `{"metadata":{"annotations":{"rev":"2"}}}`, hostMutates: "label",
	},
	{
		// The schema defaults spec.tuning ({}) and fields in it, so the apiserver stores them on
		// both sides. (Without tuning's own default, the plain Widget has no spec.tuning while
		// the read keeps the defaults the apiserver put into the hooks' one: not modelled.)
		name: "custom resource: a policy makes spec.tuning with a field, the apiserver defaults the schema's fields into it",
		config: policyHook(`{apiVersion: example.com/v1, kind: Widget}`, widgetRule,
			`!has(object.spec.tuning) || !has(object.spec.tuning.profile)`,
			createdOrAdded("object.spec.tuning", "/spec/tuning", "profile", `"fast"`)),
		object: `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {size: 1}}`, update: `{"metadata":{"labels":{"rev":"2"}}}`,
	},
}

// hostPolicy is a MutatingAdmissionPolicy of the host, bound to the namespaces labelled
// host-mutates=name, and how its mutation shows on a Pod it acted on.
type hostPolicy struct {
	name, manifest string
	shows          func(*corev1.Pod) bool
}

// hostPolicies are what a host adds to pods (a Kyverno or a webhook would do the same).
var hostPolicies = []hostPolicy{
	{
		name: "seccomp",
		manifest: admissionPolicy("host-seccomp", podRule,
			`!has(object.spec.securityContext) || !has(object.spec.securityContext.seccompProfile)`,
			createdOrAdded("object.spec.securityContext", "/spec/securityContext", "seccompProfile", `{"type": "RuntimeDefault"}`)),
		shows: func(p *corev1.Pod) bool {
			return p.Spec.SecurityContext != nil && p.Spec.SecurityContext.SeccompProfile != nil &&
				p.Spec.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
		},
	},
	{
		name: "os",
		manifest: admissionPolicy("host-os", podRule,
			`!has(object.spec.nodeSelector) || !("kubernetes.io/os" in object.spec.nodeSelector)`,
			createdOrAdded("object.spec.nodeSelector", "/spec/nodeSelector", "kubernetes.io/os", `"linux"`)),
		shows: func(p *corev1.Pod) bool { return p.Spec.NodeSelector["kubernetes.io/os"] == "linux" },
	},
	{
		name: "label",
		manifest: admissionPolicy("host-label", podRule,
			`!has(object.metadata.labels) || !("injected-by" in object.metadata.labels)`,
			createdOrAdded("object.metadata.labels", "/metadata/labels", "injected-by", `"host"`)),
		shows: func(p *corev1.Pod) bool { return p.Labels["injected-by"] == "host" },
	},
}

// installHostPolicies creates hostPolicies and their bindings in the apiserver of c and
// returns once each acts: a dry-run create of a Pod in a namespace it is bound to shows its
// mutation (the apiserver loads policies from informers, some time after the create).
func installHostPolicies(t *testing.T, c client.Client) {
	t.Helper()
	for _, hp := range hostPolicies {
		p := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(hp.manifest), &p.Object); err != nil {
			t.Fatalf("host policy %s: %v\n%s", hp.name, err, hp.manifest)
		}
		binding := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
			"metadata": map[string]any{"name": p.GetName()},
			"spec": map[string]any{
				"policyName":     p.GetName(),
				"matchResources": map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{hostMutatesLabel: hp.name}}},
			},
		}}
		probe := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + hp.name, Labels: map[string]string{hostMutatesLabel: hp.name}}}
		for _, obj := range []client.Object{p, binding, probe} {
			if err := c.Create(t.Context(), obj); err != nil {
				t.Fatalf("host policy %s: %v", hp.name, err)
			}
		}
	}
	for _, hp := range hostPolicies {
		testenv.Eventually(t, 2*time.Minute, "the host policy "+hp.name+" acts on a dry-run create", func() error {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "probe-" + hp.name},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			}
			if err := c.Create(t.Context(), p, client.DryRunAll); err != nil {
				return err
			}
			if !hp.shows(p) {
				return fmt.Errorf("not yet: the dry-run Pod is %+v", p.Spec)
			}
			return nil
		})
	}
}
