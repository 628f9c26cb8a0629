package policy_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/policy"
	"github.com/synchook/synchook/internal/testenv"
)

// conformanceCase is one policy and one Pod: synchook's result must equal the apiserver's.
type conformanceCase struct {
	name string
	// file is a manifest in examples/policies, or spec is the policy's spec below
	// matchConstraints (CREATE of v1 pods is prepended).
	file, spec string
	pod        func(*corev1.Pod) // changes to the base Pod, may be nil
	// namespaceSelector, when set, is the policy's spec.matchConstraints.namespaceSelector
	// (YAML flow). The bound namespace is labelled team=payments.
	namespaceSelector string
	// update makes the case an UPDATE (the policy's operations are [UPDATE]): the Pod, labelled
	// v=1, is created for real in the bound namespace, and the request updates it to v=2
	// (pod's changes apply to the created one); synchook's hook gets the stored Pod as its old
	// object (hooks.WithOldObject), as the admission endpoint hands on request.oldObject.
	update bool
}

func conformanceCases() []conformanceCase {
	return []conformanceCase{
		{name: "tolerations-add", file: "tolerations-add.yaml"},
		{name: "toleration-remove", file: "toleration-remove.yaml"},
		{name: "nodeselector-merge", file: "nodeselector-merge.yaml"},
		{name: "priorityclassname-remove", file: "priorityclassname-remove.yaml"},
		{name: "sidecar-initcontainer", file: "sidecar-initcontainer.yaml"},
		{name: "sidecar-no-label", file: "sidecar-initcontainer.yaml", pod: func(p *corev1.Pod) { delete(p.Labels, "mesh.example.com/inject") }},
		{name: "label-from-variable", file: "label-from-variable.yaml"},
		{name: "env-merge", file: "env-merge.yaml"},
		{name: "ac-tolerations-atomic", spec: `
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{spec: Object.spec{tolerations: [Object.spec.tolerations{key: "a", operator: "Exists"}]}}'
`},
		{name: "ac-nodeselector-atomic", spec: `
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{spec: Object.spec{nodeSelector: {"a": "b"}}}'
`},
		{name: "ac-initcontainer-with-args", spec: `
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{spec: Object.spec{initContainers: [Object.spec.initContainers{
            name: "mesh-proxy", image: "mesh/proxy:v1.0.0", args: ["proxy", "sidecar"], restartPolicy: "Always"}]}}
`},
		{name: "list-value-after-matchcondition", spec: `
  matchConditions:
    - name: has-tolerations
      expression: has(object.spec.tolerations)
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "replace", path: "/spec/tolerations",
            value: object.spec.tolerations.filter(t, !has(t.key) || t.key != "example.com/gpu")}]
`},
		{name: "ordered-mutations", spec: `
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"step": "one"}}}'
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("seen/step"),
            value: object.metadata.labels["step"] + "-then-two"}]
`, pod: func(p *corev1.Pod) { p.Annotations = map[string]string{"keep": "me"} }},
		{name: "ignore-failing-mutation", spec: `
  failurePolicy: Ignore
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"x": object.metadata.labels["missing"]}}}'
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"y": "z"}}}'
`},
		{name: "fail-on-runtime-error", spec: `
  failurePolicy: Fail
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"x": object.metadata.labels["missing"]}}}'
`},
		{name: "ignore-matchcondition-error", spec: `
  failurePolicy: Ignore
  matchConditions:
    - name: broken
      expression: 'object.metadata.labels["missing"] == "x"'
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"y": "z"}}}'
`},
		{name: "jsonpatch-test-fails", spec: `
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "test", path: "/spec/containers/0/image", value: "not-nginx"},
           JSONPatch{op: "replace", path: "/spec/containers/0/image", value: "patched"}]
`},
		{name: "jsonpatch-test-passes", spec: `
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "test", path: "/spec/containers/0/image", value: "nginx"},
           JSONPatch{op: "replace", path: "/spec/containers/0/image", value: "patched"}]
`},
		{name: "request-fields", spec: `
  variables:
    - name: info
      expression: >-
        request.operation + " " + request.kind.group + "/" + request.kind.version + "/" + request.kind.kind + " " +
        request.resource.resource + " " + request.namespace + "/" + request.name + " " + string(has(request.subResource))
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{annotations: {"info": variables.info, "old": string(oldObject == null)}}}'
`},
		{name: "variables-chain", spec: `
  variables:
    - name: images
      expression: object.spec.containers.map(c, c.image)
    - name: joined
      expression: variables.images.join(",")
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "add", path: "/metadata/labels/images-count", value: string(size(variables.images))},
                      JSONPatch{op: "add", path: "/metadata/annotations", value: {"images": variables.joined}}]'
`},
		{name: "namespaceobject-label", spec: `
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{metadata: Object.metadata{labels: {"team": namespaceObject.metadata.labels["team"],
            "ns": namespaceObject.metadata.name}}}
`},
		{name: "namespaceobject-jsonpatch", spec: `
  variables:
    - name: team
      expression: 'namespaceObject.metadata.?labels.?team.orValue("none")'
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "add", path: "/spec/nodeSelector", value: {"team": variables.team}}]'
`},
		{name: "namespaceselector-matches", namespaceSelector: "{matchLabels: {team: payments}}", spec: labelMutation},
		{name: "namespaceselector-does-not-match", namespaceSelector: "{matchExpressions: [{key: team, operator: NotIn, values: [payments]}]}", spec: labelMutation},
		{name: "jsonpatch-remove-missing", spec: `
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "remove", path: "/spec/hostname"}]'
`},
		{name: "update-reads-oldobject", update: true, spec: `
  variables:
    - name: was
      expression: 'oldObject == null ? "none" : oldObject.metadata.labels["v"]'
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "add", path: "/metadata/labels/was", value: variables.was},
           JSONPatch{op: "add", path: "/metadata/annotations", value: {
             "changed": string(oldObject != null && object.metadata.labels["v"] != oldObject.metadata.labels["v"]),
             "old-image": string(oldObject.spec.containers[0].image)}}]
`, pod: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.29" }},
		{name: "update-matchcondition-on-oldobject", update: true, spec: `
  matchConditions:
    - name: v-changed
      expression: 'oldObject.metadata.labels["v"] != object.metadata.labels["v"]'
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"from": oldObject.metadata.labels["v"]}}}'
`},
	}
}

// basePod is the Pod of every case before the case's changes.
func basePod(name, caseName string) *corev1.Pod {
	pod := samplePod()
	pod.Name = name
	pod.Labels["case"] = caseName
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	return pod
}

// The conformance test runs every case on a real kube-apiserver (envtest, dry-run creates)
// and in synchook, and compares.
//
// How objects are compared: the apiserver defaults a Pod when it is decoded and again after
// every mutation of a policy; synchook does no defaulting. So
//  1. the input X is the base Pod as the apiserver returns it from a dry-run create in a
//     namespace without the policy (already defaulted, and with what the admission plugins
//     that run before policies add: DefaultTolerationSeconds' tolerations, Priority's
//     spec.priority);
//  2. S is the dry-run create of X in the namespace where the policy is bound;
//  3. O is synchook's result on X; D is the dry-run create of O in the namespace without the
//     policy, i.e. O after the same apiserver's defaulting;
//  4. S and D must be equal, ignoring server-set metadata (uid, resourceVersion,
//     creationTimestamp, managedFields, generation), status, the namespace, and spec.priority /
//     spec.preemptionPolicy (set by the Priority plugin from priorityClassName before policies
//     run, so on the D pass of a result without them they are set again).
//
// An UPDATE case (conformanceCase.update) differs in steps 1 and 2: X is a Pod created for real
// in the bound namespace (the stored object) with the case's change, S the dry-run update to X,
// and synchook's hook gets the stored Pod as its old object (CEL's oldObject), as the admission
// endpoint hands on request.oldObject.
//
// When the apiserver refuses the request, synchook must fail too (messages are logged).
func TestConformance(t *testing.T) {
	c := apiServerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	const bound, plain = "bound", "plain"
	source := namespaces.Static{} // synchook's namespaceObject: the apiserver's own Namespace
	for _, ns := range []string{bound, plain} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"policies": ns}}}
		if ns == bound {
			obj.Labels["team"] = "payments"
		}
		must(t, c.Create(ctx, obj))
		source[ns] = obj
		must(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))
	}
	nsCtx := namespaces.WithSource(ctx, namespaces.Source{Lookup: source})
	must(t, c.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}))

	cases := conformanceCases()
	compiled := make([]*policy.Policy, len(cases))
	for i, tc := range cases {
		p := loadCase(t, tc)
		p.Name = "case-" + tc.name
		var err error
		if compiled[i], err = policy.Compile(p, nil); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		createPolicy(ctx, t, c, p, bound, tc.name)
	}
	// The sentinel policy, created last: once it acts, the apiserver has the others too (the
	// policy and binding informers deliver in order, and the plugin rebuilds its set from
	// them). It uses ApplyConfiguration, so the type converter is ready as well.
	sentinel, err := policy.Parse([]byte(manifest(labelMutation)))
	must(t, err)
	sentinel.Name = "sentinel"
	createPolicy(ctx, t, c, sentinel, bound, "sentinel")
	for {
		out, err := dryRunCreate(ctx, c, basePod("sentinel", "sentinel"), bound)
		if err == nil && out.Labels["a"] == "b" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the sentinel policy never took effect (last error: %v)", err)
		case <-time.After(200 * time.Millisecond):
		}
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := basePod("p-"+strings.ReplaceAll(tc.name, "_", "-"), tc.name)
			var (
				x, s           *corev1.Pod
				serverErr, err error
				typ, callCtx   = hooks.CreatePhysical, nsCtx
			)
			if tc.update {
				var old []byte
				x, s, old, serverErr = dryRunUpdate(ctx, t, c, pod, tc.pod, bound)
				typ, callCtx = hooks.UpdatePhysical, hooks.WithOldObject(nsCtx, old)
			} else {
				if tc.pod != nil {
					tc.pod(pod)
				}
				x, err = dryRunCreate(ctx, c, pod, plain)
				if err != nil {
					t.Fatalf("baseline dry-run: %v", err)
				}
				x.Namespace = bound
				clean(x)
				s, serverErr = dryRunCreate(ctx, c, x.DeepCopy(), bound)
			}
			fn, err := compiled[i].MutateFunc(typ)
			must(t, err)
			o, oursErr := fn(callCtx, x.DeepCopy())
			switch {
			case serverErr != nil && oursErr != nil:
				t.Logf("both fail:\n  apiserver: %v\n  synchook:  %v", serverErr, oursErr)
				return
			case serverErr != nil:
				t.Fatalf("the apiserver fails, synchook does not:\n  apiserver: %v\n  synchook result: %s", serverErr, toJSON(t, o))
			case oursErr != nil:
				t.Fatalf("synchook fails, the apiserver does not:\n  synchook: %v\n  apiserver result: %s", oursErr, toJSON(t, comparable(t, s)))
			}
			op, ok := o.(*corev1.Pod)
			if !ok {
				t.Fatalf("synchook returned a %T", o)
			}
			op = op.DeepCopy()
			op.Namespace = plain
			clean(op)
			d, err := dryRunCreate(ctx, c, op, plain)
			if err != nil {
				t.Fatalf("defaulting dry-run of synchook's result: %v", err)
			}
			want, got := comparable(t, s), comparable(t, d)
			if !reflect.DeepEqual(want, got) {
				t.Errorf("results differ\napiserver: %s\nsynchook:  %s", toJSON(t, want), toJSON(t, got))
			}
			if reflect.DeepEqual(comparable(t, x), got) {
				t.Logf("no change")
			}
		})
	}
	t.Run("namespaceSelector on cluster-scoped objects", func(t *testing.T) {
		testNamespaceSelectorOnClusterScopedObjects(ctx, t, c)
	})
}

// loadCase returns the policy of tc.
func loadCase(t *testing.T, tc conformanceCase) *admissionregistrationv1.MutatingAdmissionPolicy {
	t.Helper()
	if tc.file != "" {
		p, err := policy.ParseFile(filepath.Join("..", "..", "examples", "policies", tc.file))
		must(t, err)
		return p
	}
	ops := "[CREATE]"
	if tc.update {
		ops = "[UPDATE]"
	}
	m := strings.Replace(manifest(strings.TrimPrefix(tc.spec, "\n")), "[CREATE, UPDATE]", ops, 1)
	if tc.namespaceSelector != "" {
		m = strings.Replace(m, "    resourceRules:", "    namespaceSelector: "+tc.namespaceSelector+"\n    resourceRules:", 1)
	}
	p, err := policy.Parse([]byte(m))
	must(t, err)
	return p
}

// createPolicy creates p and a binding that applies it to Pods labelled case=caseName in the
// namespace labelled policies=ns.
func createPolicy(ctx context.Context, t *testing.T, c client.Client, p *admissionregistrationv1.MutatingAdmissionPolicy, ns, caseName string) {
	t.Helper()
	p = p.DeepCopy()
	if p.Spec.ReinvocationPolicy == "" { // required by the apiserver, defaulted by synchook
		p.Spec.ReinvocationPolicy = admissionregistrationv1.NeverReinvocationPolicy
	}
	must(t, c.Create(ctx, p))
	must(t, c.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: p.Name,
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"policies": ns}},
				ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"case": caseName}},
			},
		},
	}))
}

// dryRunCreate dry-run creates pod in namespace ns and returns what the apiserver would store.
func dryRunCreate(ctx context.Context, c client.Client, pod *corev1.Pod, ns string) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	pod.Namespace = ns
	pod.ResourceVersion = ""
	err := c.Create(ctx, pod, client.DryRunAll)
	return pod, err
}

// dryRunUpdate creates pod, labelled v=1, in namespace ns (for real: it is the stored object)
// and dry-run updates it to label v=2 with change applied (nil: none). It returns the object
// of the update request (x, the stored Pod with the changes), what the apiserver would store
// (s, or serverErr when it refuses the update) and the stored Pod's JSON (the request's
// oldObject).
func dryRunUpdate(ctx context.Context, t *testing.T, c client.Client, pod *corev1.Pod, change func(*corev1.Pod), ns string) (x, s *corev1.Pod, old []byte, serverErr error) {
	t.Helper()
	stored := pod.DeepCopy()
	stored.Namespace = ns
	stored.Labels["v"] = "1"
	must(t, c.Create(ctx, stored))
	withKind := stored.DeepCopy()
	withKind.APIVersion, withKind.Kind = "v1", "Pod" // as kube-apiserver sends oldObject
	old, err := json.Marshal(withKind)
	must(t, err)
	x = stored.DeepCopy()
	x.Labels["v"] = "2"
	if change != nil {
		change(x)
	}
	s = x.DeepCopy()
	serverErr = c.Update(ctx, s, client.DryRunAll)
	return x, s, old, serverErr
}

// clean drops what the apiserver sets on create, so the object can be sent again.
func clean(p *corev1.Pod) {
	p.UID, p.ResourceVersion, p.CreationTimestamp, p.ManagedFields, p.Generation = "", "", metav1.Time{}, nil, 0
	p.Status = corev1.PodStatus{}
}

// comparable returns p without what the comparison ignores, as JSON-like maps.
func comparable(t *testing.T, p *corev1.Pod) map[string]any {
	t.Helper()
	p = p.DeepCopy()
	clean(p)
	p.Namespace = ""
	p.Spec.Priority, p.Spec.PreemptionPolicy = nil, nil
	p.TypeMeta = metav1.TypeMeta{} // what the client leaves there differs between create and update
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	must(t, err)
	return m
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// apiServerClient starts a kube-apiserver + etcd from KUBEBUILDER_ASSETS for a conformance test
// (skipping the test when it is unset, as plain `go test ./...` leaves it), stops them when t
// ends, and returns a client of it with client-go's scheme.
func apiServerClient(t *testing.T) client.Client {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset (make test sets it)")
	}
	env := testenv.WithTimeouts(&envtest.Environment{BinaryAssetsDirectory: dir})
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
