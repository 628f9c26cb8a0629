package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

const knownSecret = "correct-horse-battery-staple"

// secretHook is a hook of type typ on secrets.
func secretHook(name string, typ hooks.HookType, fn hooks.MutateFunc) hooks.ClientHook {
	return hooks.NewFunc(name, &corev1.Secret{}, []hooks.HookType{typ}, fn)
}

func password(o client.Object) string { return string(o.(*corev1.Secret).Data["password"]) }

// TestSecretDataAppearsInNoOutput runs a Secret with a known value through every path — success,
// a hook error and a panic that both quote the value, a guard rejection, with logging at the
// highest verbosity and metrics on — and asserts the value (raw or base64) appears in no
// response, log line or metric.
func TestSecretDataAppearsInNoOutput(t *testing.T) {
	var logs testenv.LogSink
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		secretHook("labels", hooks.CreatePhysical, func(_ context.Context, o client.Object) (client.Object, error) {
			o.SetLabels(map[string]string{"synced": "true"})
			return o, nil
		}),
		secretHook("quotes-in-error", hooks.UpdatePhysical, func(_ context.Context, o client.Object) (client.Object, error) {
			return nil, fmt.Errorf("password %q is too weak (base64 %s)", password(o), base64.StdEncoding.EncodeToString([]byte(password(o))))
		}),
		secretHook("quotes-in-panic", hooks.DeletePhysical, func(_ context.Context, o client.Object) (client.Object, error) {
			panic("cannot handle " + password(o))
		}),
		secretHook("renames", hooks.GetPhysical, func(_ context.Context, o client.Object) (client.Object, error) {
			o.SetName(password(o))
			return o, nil
		}),
	)
	rec := metrics.New(reg, logs.Logger())
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{Observer: rec}), webhook.Options{Log: logs.Logger(), Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	secretJSON := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"ns"},"data":{"password":%q},"stringData":{"other":%q}}`,
		base64.StdEncoding.EncodeToString([]byte(knownSecret)), knownSecret)
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Secret"},"namespace":"ns","name":"db","object":` + secretJSON + `}}`

	var out bytes.Buffer
	for _, typ := range []string{"CreatePhysical", "UpdatePhysical", "DeletePhysical", "GetPhysical", "CreateVirtual"} {
		rr := httptest.NewRecorder()
		s.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodPost, "/mutate/"+typ, strings.NewReader(body)))
		fmt.Fprintf(&out, "%s %d %s\n", typ, rr.Code, rr.Body.String())
	}
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		_, _ = expfmt.MetricFamilyToText(&out, mf)
	}
	out.WriteString(logs.String())

	for _, want := range []string{`"allowed":true`, `hook \"quotes-in-error\"`, `hook \"quotes-in-panic\"`, `the hook panicked on a Secret; its panic value is withheld`, `may not change /metadata/name`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %s; every path must have run:\n%s", want, out.String())
		}
	}
	for _, leak := range []string{knownSecret, base64.StdEncoding.EncodeToString([]byte(knownSecret))} {
		if strings.Contains(out.String(), leak) {
			t.Errorf("secret value %q appears in the output:\n%s", leak, out.String())
		}
	}
}
