package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/webhook"
)

// testHook is a CreatePhysical hook on pods.
func testHook(name string, fn hooks.MutateFunc) hooks.ClientHook {
	return hooks.NewFunc(name, &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, fn)
}

func addLabel(_ context.Context, o client.Object) (client.Object, error) {
	o.SetLabels(map[string]string{"synchook.io/hooked": "true"})
	return o, nil
}

func newTestServer(t *testing.T, opts webhook.Options, hs ...hooks.ClientHook) *httptest.Server {
	t.Helper()
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hs...)
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

const podReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",` +
	`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"ns","name":"p","operation":"CREATE",` +
	`"userInfo":{},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestMutateReturnsAJSONPatch(t *testing.T) {
	ts := newTestServer(t, webhook.Options{}, testHook("labels", addLabel))
	code, body := post(t, ts.URL+"/mutate/CreatePhysical", podReview)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	want := `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true,` +
		`"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZhbHVlIjp7InN5bmNob29rLmlvL2hvb2tlZCI6InRydWUifX1d","patchType":"JSONPatch"}}`
	if string(body) != want {
		t.Errorf("response\n got %s\nwant %s", body, want)
	}
	var review admissionv1.AdmissionReview
	_ = json.Unmarshal(body, &review)
	if string(review.Response.Patch) != `[{"op":"add","path":"/metadata/labels","value":{"synchook.io/hooked":"true"}}]` {
		t.Errorf("patch = %s", review.Response.Patch)
	}
}

func TestMutateWithoutChangeHasNoPatch(t *testing.T) {
	ts := newTestServer(t, webhook.Options{}, testHook("labels", addLabel))
	code, body := post(t, ts.URL+"/mutate/UpdatePhysical", podReview)
	if code != 200 || string(body) != `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true}}` {
		t.Errorf("status %d, body %s", code, body)
	}
}

func TestMutateReportsAHookErrorAsNotAllowed(t *testing.T) {
	ts := newTestServer(t, webhook.Options{}, testHook("refuser", func(context.Context, client.Object) (client.Object, error) {
		return nil, errors.New("pods named p are not allowed")
	}))
	code, body := post(t, ts.URL+"/mutate/CreatePhysical", podReview)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || code != 200 {
		t.Fatalf("status %d, body %s", code, body)
	}
	r := review.Response
	if r.Allowed || r.Result == nil || r.Result.Code != 403 || r.Patch != nil ||
		r.Result.Message != `hook "refuser" CreatePhysical Pod: pods named p are not allowed` {
		t.Errorf("response = %+v, result %+v", r, r.Result)
	}
}

func TestMutateRejectsBadRequests(t *testing.T) {
	ts := newTestServer(t, webhook.Options{MaxRequestBytes: 4096}, testHook("labels", addLabel))
	cases := []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"an unknown hook type is 404 with the valid ones", "POST", "/mutate/ApplyPhysical", podReview, 404, "valid: CreatePhysical, UpdatePhysical"},
		{"a GET is 405", "GET", "/mutate/CreatePhysical", "", 405, "only POST"},
		{"a body over the limit is 413", "POST", "/mutate/CreatePhysical", `{"x":"` + strings.Repeat("a", 5000) + `"}`, 413, "exceeds the limit of 4096 bytes"},
		{"malformed JSON is 400", "POST", "/mutate/CreatePhysical", `{"apiVersion":`, 400, "not an AdmissionReview"},
		{"another kind is 400", "POST", "/mutate/CreatePhysical", `{"apiVersion":"v1","kind":"Pod"}`, 400, "want apiVersion"},
		{"a review without request is 400", "POST", "/mutate/CreatePhysical", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400, "no request"},
		{"a request without object is 400", "POST", "/mutate/CreatePhysical", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`, 400, "neither object nor oldObject"},
		{"a key in another letter case is 400", "POST", "/mutate/CreatePhysical", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","Object":{}}}`, 400, `key "Object": keys are case-sensitive, want "object"`},
		{"a repeated request is 400", "POST", "/mutate/CreatePhysical", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"},"request":{"uid":"v"}}`, 400, `key "request" appears more than once`},
		{"a repeated object is 400", "POST", "/mutate/CreatePhysical", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{},"object":{}}}`, 400, `request: key "object" appears more than once`},
		{"a request that is not an object is 400", "POST", "/mutate/CreatePhysical", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"u"}`, 400, "not an AdmissionReview"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.msg) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, b, tc.code, tc.msg)
			}
		})
	}
}

// TestMutateFindsTheObjectWhereverItIs: the object and oldObject are cut out of the request
// without decoding it, so their order, escaped keys, null and whitespace must not matter.
func TestMutateFindsTheObjectWhereverItIs(t *testing.T) {
	ts := newTestServer(t, webhook.Options{}, testHook("labels", addLabel))
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","annotations":{"object":"{\\\"}"}}}`
	for _, req := range []string{
		`{"uid":"u","oldObject":null,"object":` + pod + `}`,
		`{"object":` + pod + `,"uid":"u","oldObject":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"old"}}}`,
		`{"uid":"u","obj\u0065ct" :  ` + pod + ` , "oldObject":null}`,
		`{"uid":"u","oldObject":` + pod + `}`,
	} {
		body := ` { "apiVersion":"admission.k8s.io/v1", "kind":"AdmissionReview", "request": ` + req + ` } `
		code, out := post(t, ts.URL+"/mutate/CreatePhysical", body)
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(out, &review); err != nil || code != 200 || review.Response == nil {
			t.Fatalf("%s: status %d, body %s", req, code, out)
		}
		if review.Response.UID != "u" || string(review.Response.Patch) != `[{"op":"add","path":"/metadata/labels","value":{"synchook.io/hooked":"true"}}]` {
			t.Errorf("%s: response %s", req, out)
		}
	}
}

func TestMutateStopsReadingABodyWithoutContentLength(t *testing.T) {
	ts := newTestServer(t, webhook.Options{MaxRequestBytes: 1024}, testHook("labels", addLabel))
	// io.MultiReader hides the length, so the client streams the body chunked.
	body := io.MultiReader(strings.NewReader(`{"x":"`), bytes.NewReader(bytes.Repeat([]byte("a"), 1<<20)))
	resp, err := http.Post(ts.URL+"/mutate/CreatePhysical", "application/json", body)
	if err != nil {
		t.Skipf("server closed the connection while the client was sending: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("status = %d, want 413", resp.StatusCode)
	}
}

func TestCapabilitiesAndHealth(t *testing.T) {
	ts := newTestServer(t, webhook.Options{}, testHook("labels", addLabel))
	resp, err := http.Get(ts.URL + "/capabilities")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"resources":[{"apiVersion":"v1","kind":"Pod","hookTypes":[{"type":"CreatePhysical","hooks":["labels"]}]}]}`
	if string(b) != want {
		t.Errorf("capabilities = %s, want %s", b, want)
	}
	for _, path := range []string{"/healthz", "/readyz", "/readyz/ping"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s = %d", path, resp.StatusCode)
		}
	}
}
