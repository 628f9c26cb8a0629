package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	admissionv1 "k8s.io/api/admission/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/canary"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/webhook"
)

// review returns an AdmissionReview for object of kind (v1) and its name.
func review(kind string, object []byte) string {
	return fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":%q},`+
		`"namespace":"tenant","name":"db","operation":"UPDATE","object":%s}}`, kind, object)
}

// TestASecretCanaryLeavesTheAdmissionEndpointInNoForm sends a Secret whose hook fails in every
// way canary.Leaks knows, alone and as an item of a SecretList, with logs at the highest
// verbosity, metrics (whose Recorder logs a hook that keeps failing) and capture of every
// request, and searches the responses, the log, the metrics text and the capture files for
// the value in every encoding.
func TestASecretCanaryLeavesTheAdmissionEndpointInNoForm(t *testing.T) {
	var logs canary.Buffer
	log := canary.Logger(&logs)
	reg := engine.NewRegistry(nil)
	reg.MustRegister(canary.Hook("leaky", hooks.UpdatePhysical))
	dir := t.TempDir()
	w, err := capture.New(capture.Options{Dir: dir, Sample: 1, Registry: reg, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go w.Run(ctx)
	rec := metrics.New(reg, log)
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{Observer: rec, Capture: w.Capture}),
		webhook.Options{Log: log, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}

	captured := 0 // requests capture writes: not those that failed on a deadline
	for i, leak := range canary.Leaks {
		cause := leak.Cause(canary.Secret(i))
		want := webhook.StatusCode(&failure.HookError{Err: cause})
		list := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"SecretList","items":[%s]}`, canary.SecretJSON(i))
		for _, req := range []struct {
			what, kind string
			object     []byte
		}{
			{"a Secret", "Secret", canary.SecretJSON(i)},
			{"a SecretList", "SecretList", list},
		} {
			t.Run(leak.Name+" in "+req.what, func(t *testing.T) {
				if !errors.Is(cause, context.DeadlineExceeded) {
					captured++
				}
				rr := httptest.NewRecorder()
				s.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodPost, "/mutate/UpdatePhysical", strings.NewReader(review(req.kind, req.object))))
				canary.Check(t, "the admission response", rr.Body.String(), canary.Value)
				var out admissionv1.AdmissionReview
				if err := json.Unmarshal(rr.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.Result == nil {
					t.Fatalf("response %d %s: %v", rr.Code, rr.Body, err)
				}
				res := out.Response
				if res.Allowed || res.Result.Code != want {
					t.Errorf("allowed %v, code %d; want a refusal with %d as for the hook's own error", res.Allowed, res.Result.Code, want)
				}
				if !strings.Contains(res.Result.Message, `hook "leaky" UpdatePhysical Secret: the hook `) || !strings.Contains(res.Result.Message, "is withheld (detail ") {
					t.Errorf("message %q does not name the hook and the withheld detail", res.Result.Message)
				}
			})
		}
	}
	w.Close()

	t.Run("the log holds no form of the value", func(t *testing.T) {
		text := logs.String()
		if !strings.Contains(text, "hook chain failed") || !strings.Contains(text, "hook keeps failing") {
			t.Errorf("the log lacks the failure lines, so it proves nothing:\n%s", text)
		}
		canary.Check(t, "the log", text, canary.Value)
	})
	t.Run("the metrics hold no form of the value", func(t *testing.T) {
		families, err := crmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		for _, mf := range families {
			if _, err := expfmt.MetricFamilyToText(&text, mf); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(text.String(), `synchook_hook_failures_total{hook="leaky"`) {
			t.Errorf("the metrics lack the hook's failures, so they prove nothing")
		}
		canary.Check(t, "the metrics", text.String(), canary.Value)
	})
	t.Run("the capture files hold no form of the value", func(t *testing.T) {
		files, err := capture.Files(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != captured {
			t.Errorf("%d capture files for %d requests", len(files), captured)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			canary.Check(t, "capture file "+f, string(b), canary.Value)
		}
	})
}
