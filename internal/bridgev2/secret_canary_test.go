package bridgev2_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/canary"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/metrics"
)

// TestASecretCanaryLeavesPluginV2InNoForm sends a Secret whose hook fails in every way
// canary.Leaks knows through a real go-plugin connection, as vcluster's plugin manager does,
// and searches the gRPC errors, the Server's log (at every verbosity, with the hook Observer
// and metrics logging there too) and go-plugin's own stderr for the value in every encoding.
func TestASecretCanaryLeavesPluginV2InNoForm(t *testing.T) {
	var logs, stderr canary.Buffer
	log := canary.Logger(&logs)
	reg := testRegistry(t)
	reg.MustRegister(canary.Hook("leaky", hooks.UpdatePhysical))
	rec := metrics.New(reg, log)
	srv, err := bridgev2.New(engine.NewRunner(reg, engine.RunnerOptions{Observer: rec}), bridgev2.Options{Log: log, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	pc := dispenseServer(t, srv, &stderr)

	for i, leak := range canary.Leaks {
		want := bridge.StatusCode(&failure.HookError{Err: leak.Cause(canary.Secret(i))})
		t.Run(leak.Name, func(t *testing.T) {
			_, err := pc.Mutate(t.Context(), &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Secret", Type: "UpdatePhysical", Object: string(canary.SecretJSON(i))})
			if err == nil {
				t.Fatal("the failing hook did not fail the call")
			}
			st := status.Convert(err)
			canary.Check(t, "the gRPC error vcluster gets", fmt.Sprintf("%v\n%+v", err, st.Proto()), canary.Value)
			if st.Code() != want {
				t.Errorf("code %s, want %s as for the hook's own error", st.Code(), want)
			}
			if !strings.Contains(st.Message(), `hook "leaky" UpdatePhysical Secret: the hook `) || !strings.Contains(st.Message(), "is withheld (detail ") {
				t.Errorf("message %q does not name the hook and the withheld detail", st.Message())
			}
		})
	}
	t.Run("the log and go-plugin's stderr hold no form of the value", func(t *testing.T) {
		text := logs.String()
		if !strings.Contains(text, "hook chain failed") || !strings.Contains(text, "hook keeps failing") {
			t.Errorf("the log lacks the failure lines, so it proves nothing:\n%s", text)
		}
		canary.Check(t, "the log", text, canary.Value)
		canary.Check(t, "go-plugin's stderr", stderr.String(), canary.Value)
	})
}
