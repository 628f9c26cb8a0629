package webhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policy"
	"github.com/synchook/synchook/webhook"
)

// oldObjectPolicy is a MutatingAdmissionPolicy on UPDATE of pods that labels the object
// was=<oldObject's label v> ("none" when oldObject is null) and annotates whether label v
// changed.
const oldObjectPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: old
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: [v1]
        operations: [UPDATE]
        resources: [pods]
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          [JSONPatch{op: "add", path: "/metadata/labels/was",
             value: oldObject == null ? "none" : oldObject.metadata.labels["v"]},
           JSONPatch{op: "add", path: "/metadata/annotations",
             value: {"changed": string(oldObject != null && object.metadata.labels["v"] != oldObject.metadata.labels["v"])}}]
`

// policyHook returns the hook of oldObjectPolicy for UpdatePhysical, as config registers it.
func policyHook(t *testing.T) hooks.ClientHook {
	t.Helper()
	m, err := policy.Parse([]byte(oldObjectPolicy))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := p.MutateFunc(hooks.UpdatePhysical)
	if err != nil {
		t.Fatal(err)
	}
	return hooks.NewFunc("policy-old", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical}, fn)
}

// updateReview returns an AdmissionReview of operation op for the Pod object with oldObject old
// ("" leaves it out).
func updateReview(op, object, old string) string {
	req := `{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"namespace":"ns","name":"p","operation":"` + op + `","userInfo":{},"object":` + object
	if old != "" {
		req += `,"oldObject":` + old
	}
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + req + `}}`
}

const (
	storedPod  = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","labels":{"v":"1"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
	updatedPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","labels":{"v":"2"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
)

// reviewResponse posts body to path of ts's URL and returns the AdmissionReview's response.
func reviewResponse(t *testing.T, url, body string) *admissionv1.AdmissionResponse {
	t.Helper()
	code, out := post(t, url, body)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil || code != 200 || review.Response == nil {
		t.Fatalf("status %d, body %s", code, out)
	}
	return review.Response
}

// TestAdmissionUpdateGivesTheOldObject: an UPDATE's request.oldObject reaches the hooks of an
// Update* type (a policy's CEL oldObject, a Go hook's hooks.OldObject); without one, and on
// other operations, there is none.
func TestAdmissionUpdateGivesTheOldObject(t *testing.T) {
	var seen []string
	goHook := hooks.NewFunc("go-old", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical, hooks.CreatePhysical},
		func(ctx context.Context, o client.Object) (client.Object, error) {
			raw, ok := hooks.OldObject(ctx)
			if ok {
				seen = append(seen, string(raw))
			} else {
				seen = append(seen, "")
			}
			return o, nil
		})
	ts := newTestServer(t, webhook.Options{}, policyHook(t), goHook)
	cases := []struct {
		name, path, body, patch, seen string
	}{
		{
			"an UPDATE with oldObject", "/mutate/UpdatePhysical", updateReview("UPDATE", updatedPod, storedPod),
			`[{"op":"add","path":"/metadata/labels/was","value":"1"},{"op":"add","path":"/metadata/annotations","value":{"changed":"true"}}]`, storedPod,
		},
		{
			"an UPDATE with oldObject null", "/mutate/UpdatePhysical", updateReview("UPDATE", updatedPod, "null"),
			`[{"op":"add","path":"/metadata/labels/was","value":"none"},{"op":"add","path":"/metadata/annotations","value":{"changed":"false"}}]`, "",
		},
		{
			"an UPDATE without oldObject", "/mutate/UpdatePhysical", updateReview("UPDATE", updatedPod, ""),
			`[{"op":"add","path":"/metadata/labels/was","value":"none"},{"op":"add","path":"/metadata/annotations","value":{"changed":"false"}}]`, "",
		},
		{"a CREATE hook type on an UPDATE", "/mutate/CreatePhysical", updateReview("UPDATE", updatedPod, storedPod), "", ""},
		{"a CREATE with an oldObject", "/mutate/CreatePhysical", updateReview("CREATE", updatedPod, storedPod), "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			resp := reviewResponse(t, ts.URL+tc.path, tc.body)
			if !resp.Allowed || string(resp.Patch) != tc.patch {
				t.Errorf("allowed %v, patch %s, want %s (result %v)", resp.Allowed, resp.Patch, tc.patch, resp.Result)
			}
			if len(seen) != 1 || seen[0] != tc.seen {
				t.Errorf("the Go hook saw old objects %q, want [%q]", seen, tc.seen)
			}
		})
	}
}

// TestAdmissionRefusesAMalformedOldObject: an UPDATE's oldObject that is not a JSON object of
// the request's kind (checked for every Update chain), or does not decode where a hook reads it,
// is answered 400 with a message naming request.oldObject; the object is never patched.
func TestAdmissionRefusesAMalformedOldObject(t *testing.T) {
	ts := newTestServer(t, webhook.Options{}, policyHook(t))
	for _, tc := range []struct{ name, old, msg string }{
		{"a number", `5`, "not a JSON object"},
		{"a string", `"p"`, "not a JSON object"},
		{"a list", `[` + storedPod + `]`, "not a JSON object"},
		{"another kind", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"p","namespace":"ns"}}`, "old object is v1/Secret but the request is for v1/Pod"},
		{"a repeated key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","name":"q"}}`, `metadata: key "name" appears more than once`},
		{"a field that does not decode", `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"v":1}}}`, "malformed old object: json: cannot unmarshal number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := reviewResponse(t, ts.URL+"/mutate/UpdatePhysical", updateReview("UPDATE", updatedPod, tc.old))
			if resp.Result != nil {
				t.Logf("%d %s", resp.Result.Code, resp.Result.Message)
			}
			if resp.Allowed || resp.Patch != nil || resp.Result == nil || resp.Result.Code != 400 ||
				!strings.HasPrefix(resp.Result.Message, "request.oldObject: ") || !strings.Contains(resp.Result.Message, tc.msg) {
				t.Errorf("allowed %v, patch %s, result %+v; want 400 starting request.oldObject and containing %q", resp.Allowed, resp.Patch, resp.Result, tc.msg)
			}
		})
	}
}
