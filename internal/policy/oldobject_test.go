package policy_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/policy"
)

// readsOldObject labels the object was=<oldObject's label v> ("none" when oldObject is null)
// and annotates it changed=<whether label v differs from oldObject's>.
const readsOldObject = `  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "add", path: "/metadata/labels/was",
             value: oldObject == null ? "none" : oldObject.metadata.labels["v"]},
           JSONPatch{op: "add", path: "/metadata/annotations",
             value: {"changed": string(oldObject != null && object.metadata.labels["v"] != oldObject.metadata.labels["v"])}}]
`

const (
	newPodJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","labels":{"v":"2"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
	oldPodJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","labels":{"v":"1"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
)

// policyRegistry returns a registry with the policy of manifest m registered for the hook
// types types on resource (as config registers a policy, without its filter).
func policyRegistry(t *testing.T, m string, opts policy.Options, resource client.Object, types ...hooks.HookType) *engine.Registry {
	t.Helper()
	p, err := load(t, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[hooks.HookType]hooks.MutateFunc{}
	for _, typ := range types {
		if funcs[typ], err = p.MutateFunc(typ); err != nil {
			t.Fatal(err)
		}
	}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFuncs("policy", resource, funcs))
	return reg
}

// TestUpdateReadsOldObject: on UPDATE, CEL's oldObject is the old object the call was given
// (admission's request.oldObject), and null without one (vcluster, which sends none).
func TestUpdateReadsOldObject(t *testing.T) {
	reg := policyRegistry(t, strings.Replace(manifest(readsOldObject), "[CREATE, UPDATE]", "[UPDATE]", 1), policy.Options{},
		&corev1.Pod{}, hooks.UpdatePhysical, hooks.UpdateVirtual)
	pod := corev1.SchemeGroupVersion.WithKind("Pod")
	for _, typ := range []hooks.HookType{hooks.UpdatePhysical, hooks.UpdateVirtual} {
		res, err := reg.MutateWithOptions(t.Context(), pod, typ, []byte(newPodJSON), engine.MutateOptions{OldObject: []byte(oldPodJSON)})
		if err != nil {
			t.Fatal(err)
		}
		want := `[{"op":"add","path":"/metadata/labels/was","value":"1"},{"op":"add","path":"/metadata/annotations","value":{"changed":"true"}}]`
		if string(res.Patch) != want {
			t.Errorf("%s with oldObject: patch %s, want %s", typ, res.Patch, want)
		}
		res, err = reg.Mutate(t.Context(), pod, typ, []byte(newPodJSON))
		if err != nil {
			t.Fatal(err)
		}
		want = `[{"op":"add","path":"/metadata/labels/was","value":"none"},{"op":"add","path":"/metadata/annotations","value":{"changed":"false"}}]`
		if string(res.Patch) != want {
			t.Errorf("%s without oldObject: patch %s, want %s", typ, res.Patch, want)
		}
	}
}

// TestUpdateReadsOldObjectUnstructured: a custom resource's old object is decoded like its
// object, as *unstructured.Unstructured with the kind, also when its JSON has no apiVersion and
// kind.
func TestUpdateReadsOldObjectUnstructured(t *testing.T) {
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	m := strings.NewReplacer(`apiGroups: [""]`, `apiGroups: [example.com]`, "resources: [pods]", "resources: [widgets]").Replace(manifest(`  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "add", path: "/spec/grew", value: object.spec.size - oldObject.spec.size},
           JSONPatch{op: "add", path: "/spec/oldKind", value: oldObject.kind}]
`))
	p, err := load(t, m, policy.Options{Kinds: []schema.GroupVersionKind{widget}})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := p.MutateFunc(hooks.UpdatePhysical)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns"},
		"spec":     map[string]any{"size": int64(5)},
	}}
	ctx := hooks.WithOldObject(t.Context(), []byte(`{"metadata":{"name":"w","namespace":"ns"},"spec":{"size":3}}`))
	out, err := fn(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	spec := out.(*unstructured.Unstructured).Object["spec"].(map[string]any)
	if spec["grew"] != int64(2) || spec["oldKind"] != "Widget" {
		t.Errorf("spec = %v, want grew 2 and oldKind Widget", spec)
	}
}

// TestMalformedOldObject: an old object that does not decode fails the policy whatever its
// failurePolicy (the request is malformed: 400 on the webhook), for a policy that reads it.
func TestMalformedOldObject(t *testing.T) {
	const bad = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":5}}`
	pod := corev1.SchemeGroupVersion.WithKind("Pod")
	for _, fp := range []string{"Fail", "Ignore"} {
		reg := policyRegistry(t, manifest("  failurePolicy: "+fp+"\n"+readsOldObject), policy.Options{}, &corev1.Pod{}, hooks.UpdatePhysical)
		_, err := reg.MutateWithOptions(t.Context(), pod, hooks.UpdatePhysical, []byte(newPodJSON), engine.MutateOptions{OldObject: []byte(bad)})
		if !errors.Is(err, hooks.ErrMalformedOldObject) || !strings.Contains(err.Error(), "oldObject: malformed old object: json: cannot unmarshal number") {
			t.Errorf("failurePolicy %s: error %v, want a malformed oldObject", fp, err)
		}
		if f, _ := failure.Classify(err); f != failure.Invalid {
			t.Errorf("failurePolicy %s: Classify = %v, want Invalid", fp, f)
		}
	}
	// A policy that does not name oldObject does not decode it.
	reg := policyRegistry(t, manifest(labelMutation), policy.Options{}, &corev1.Pod{}, hooks.UpdatePhysical)
	res, err := reg.MutateWithOptions(t.Context(), pod, hooks.UpdatePhysical, []byte(newPodJSON), engine.MutateOptions{OldObject: []byte(bad)})
	if err != nil || res.Patch == nil {
		t.Errorf("a policy that does not read oldObject: patch %s, error %v", res.Patch, err)
	}
}

// TestAuthorizerRefusedAtLoad: an expression that uses authorizer is refused when the policy
// is compiled, naming its field and why, not with CEL's "undeclared reference"; expressions
// that only mention the word load.
func TestAuthorizerRefusedAtLoad(t *testing.T) {
	const check = `authorizer.group("").resource("pods").check("get").allowed()`
	cases := []struct{ name, spec, field string }{
		{
			"a matchCondition", "  matchConditions:\n    - name: ok\n      expression: 'true'\n    - name: authz\n      expression: '" + check + "'\n" + labelMutation,
			"spec.matchConditions[1].expression",
		},
		{"a JSONPatch mutation", `  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "add", path: "/metadata/labels/ok", value: string(` + check + `)}]'
`, "spec.mutations[0].jsonPatch.expression"},
		{"authorizer.requestResource in an ApplyConfiguration", labelMutation + `    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"ok": string(authorizer.requestResource.check("get").allowed())}}}'
`, "spec.mutations[1].applyConfiguration.expression"},
		{"a variable", "  variables:\n    - name: allowed\n      expression: '" + check + "'\n" + labelMutation, "spec.variables[0].expression"},
		{
			"inside a comprehension", "  matchConditions:\n    - name: c\n      expression: 'object.spec.containers.all(c, " + check + ")'\n" + labelMutation,
			"spec.matchConditions[0].expression",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, manifest(tc.spec), policy.Options{})
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalid", err)
			}
			msg := err.Error()
			for _, want := range []string{tc.field + ": Invalid value: ", "uses authorizer", "no requesting user"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not contain %q:\n%s", want, msg)
				}
			}
			if strings.Contains(msg, "undeclared reference") {
				t.Errorf("error still has CEL's undeclared reference:\n%s", msg)
			}
		})
	}
	for _, expr := range []string{
		`object.metadata.labels["authorizer"] == "x"`,                                // a key
		`object.spec.containers.all(authorizer, authorizer.name != "")`,              // a comprehension's own variable
		`object.spec.containers.all(i, authorizer, i >= 0 && authorizer.name != "")`, // a two-variable comprehension's
		`"authorizer" != object.metadata.name`,
	} {
		if _, err := load(t, manifest("  matchConditions:\n    - name: c\n      expression: '"+strings.ReplaceAll(expr, "'", "''")+"'\n"+labelMutation), policy.Options{}); err != nil {
			t.Errorf("%s: %v", expr, err)
		}
	}
}
