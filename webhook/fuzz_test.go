package webhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/webhook"
)

// FuzzAdmissionReview sends arbitrary bodies to /mutate/CreatePhysical. The handler must never
// panic and must answer 200 with an AdmissionReview whose response uid is the request uid, or
// 400/413 for bad input — never a 5xx.
func FuzzAdmissionReview(f *testing.F) {
	f.Add([]byte(podReview))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"apiVersion":"v1","kind":"Pod","metadata":null}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod","version":"v1"},"oldObject":{"metadata":{"labels":{"a":1}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"PodList","version":"v1"},"object":{"items":[{},null,{"metadata":{}}]}}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod","version":"v1"},"object":{"kind":"Secret","metadata":{"Labels":{},"labels":{"a":"1","a":"2"}}}}}`))
	reg := engine.NewRegistry(nil)
	reg.MustRegister(testHook("labels", addLabel))
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{MaxRequestBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate/CreatePhysical", bytes.NewReader(body)))
		switch rec.Code {
		case 400, 413:
			return
		case 200:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.Bytes())
		}
		var in, out admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("200 for a body that is not an AdmissionReview: %q", body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != in.Request.UID {
			t.Fatalf("bad response %s (%v) for %q", rec.Body.Bytes(), err, body)
		}
		if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Code >= 500 && out.Response.Result.Code != 504) {
			t.Fatalf("server-side failure %s for %q", rec.Body.Bytes(), body)
		}
	})
}
