package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/tenanttest"
	"github.com/synchook/synchook/patch"
	"github.com/synchook/synchook/webhook"
)

// admissionMutator POSTs obj in an AdmissionReview to /mutate/{type}?timeout=1s
// (tenanttest.RequestTimeout) of the server at url, as kube-apiserver does, waits
// tenanttest.CallTimeout for the answer and applies its JSON Patch to obj. An answer of
// allowed: false is an error.
func admissionMutator(url string, hc *http.Client) tenanttest.Mutator {
	seq := 0
	return func(t *testing.T, typ hooks.HookType, gvk schema.GroupVersionKind, obj []byte) ([]byte, error) {
		t.Helper()
		seq++
		uid := types.UID(fmt.Sprintf("tenant-%d", seq))
		req := &admissionv1.AdmissionRequest{UID: uid, Kind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}}
		switch {
		case strings.HasPrefix(string(typ), "Create"):
			req.Operation = admissionv1.Create
		case strings.HasPrefix(string(typ), "Update"):
			req.Operation = admissionv1.Update
		case strings.HasPrefix(string(typ), "Delete"):
			req.Operation = admissionv1.Delete
		}
		if req.Operation == admissionv1.Delete {
			req.OldObject.Raw = obj
		} else {
			req.Object.Raw = obj
		}
		body, err := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Request:  req,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), tenanttest.CallTimeout)
		defer cancel()
		target := url + "/mutate/" + string(typ) + "?timeout=" + tenanttest.RequestTimeout.String()
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(hreq)
		if err != nil {
			return nil, fmt.Errorf("POST /mutate/%s: %w", typ, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("POST /mutate/%s: read the answer: %w", typ, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("POST /mutate/%s: HTTP %d: %.300s", typ, resp.StatusCode, data)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(data, &out); err != nil || out.Response == nil || out.Response.UID != uid {
			t.Fatalf("POST /mutate/%s: not the AdmissionReview answer of uid %s (%v): %.300s", typ, uid, err, data)
		}
		r := out.Response
		if !r.Allowed {
			if r.Result == nil {
				return nil, fmt.Errorf("allowed: false without a result")
			}
			return nil, fmt.Errorf("allowed: false, %d: %s", r.Result.Code, r.Result.Message)
		}
		if len(r.Patch) == 0 {
			return obj, nil
		}
		if r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Fatalf("POST /mutate/%s: a patch of type %v", typ, r.PatchType)
		}
		return patch.Apply(obj, r.Patch)
	}
}

// TestTenantAttacksOverTheAdmissionEndpoint runs the tenant attack suite against a webhook
// Server of tenanttest.Config (undo on, as the binary runs) over HTTPS on a loopback port.
func TestTenantAttacksOverTheAdmissionEndpoint(t *testing.T) {
	s, err := webhook.NewServer(engine.NewRunner(tenanttest.Registry(t), engine.RunnerOptions{}), webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(s.Handler())
	t.Cleanup(ts.Close)
	tenanttest.Run(t, tenanttest.Transport{Mutate: admissionMutator(ts.URL, ts.Client()), Lists: true})
}
