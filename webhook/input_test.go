package webhook_test

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/synchook/synchook/webhook"
)

// TestMutateRefusesAmbiguousObjects: an object of another kind than the request, or with keys
// that encoding/json reads otherwise than synchook, is answered allowed: false with 400 and the
// engine's message (the message every transport gives).
func TestMutateRefusesAmbiguousObjects(t *testing.T) {
	ts := newTestServer(t, webhook.Options{}, testHook("labels", addLabel))
	review := func(object string) string {
		return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",` +
			`"kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"ns","name":"p","operation":"CREATE","object":` + object + `}}`
	}
	cases := []struct {
		name, object, want string
	}{
		{
			"a Secret sent as a Pod is 400 naming both kinds", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"p"},"data":{"k":"c2VjcmV0"}}`,
			`decode Pod object: object is v1/Secret but the request is for v1/Pod`,
		},
		{
			"Labels in metadata is 400 naming the key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","Labels":{"a":"b"}}}`,
			`decode Pod object: metadata: key "Labels" differs only in case from "labels"`,
		},
		{
			"a repeated label is 400 naming the key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"1","a":"2"}}}`,
			`decode Pod object: metadata.labels: key "a" appears more than once`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, ts.URL+"/mutate/CreatePhysical", review(tc.object))
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(body, &got); err != nil || code != 200 || got.Response == nil {
				t.Fatalf("status %d, body %s", code, body)
			}
			r := got.Response
			if r.Allowed || r.Patch != nil || r.Result == nil || r.Result.Code != 400 || r.Result.Message != tc.want {
				t.Errorf("response %+v, result %+v; want allowed false, 400, %s", r, r.Result, tc.want)
			}
		})
	}
}
