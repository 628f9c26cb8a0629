package bridge_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/canary"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/vclusterstub"
)

// TestASecretCanaryLeavesTheV1BridgeInNoForm sends a Secret whose hook fails in every way
// canary.Leaks knows to Bridge.Mutate (with the hook Observer and metrics logging to the same
// log) and over gRPC as vcluster calls it, and searches the gRPC errors and the log for the
// value in every encoding. (vcluster sends a plugin single objects, never Lists: the bridge
// answers a SecretList unchanged, so a List's items are hooks' tests, not this one's.)
func TestASecretCanaryLeavesTheV1BridgeInNoForm(t *testing.T) {
	var logs canary.Buffer
	log := canary.Logger(&logs)
	reg := testRegistry(t)
	reg.MustRegister(canary.Hook("leaky", hooks.UpdatePhysical))
	rec := metrics.New(reg, log)
	b, err := bridge.New(engine.NewRunner(reg, engine.RunnerOptions{Observer: rec}), bridge.Options{Address: "localhost:0", Log: log, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	_, p := startBridge(t, reg, bridge.Options{Log: log})

	for i, leak := range canary.Leaks {
		want := bridge.StatusCode(&failure.HookError{Err: leak.Cause(canary.Secret(i))})
		t.Run(leak.Name, func(t *testing.T) {
			mr := &remote.MutateRequest{ApiVersion: "v1", Kind: "Secret", Type: "UpdatePhysical", Object: string(canary.SecretJSON(i))}
			_, direct := b.Mutate(t.Context(), mr)
			_, wire := vclusterstub.Mutate(t.Context(), p.GetAddress(), mr)
			for where, err := range map[string]error{"the error of Bridge.Mutate": direct, "the gRPC error vcluster gets": wire} {
				if err == nil {
					t.Fatalf("%s: nil", where)
				}
				canary.Check(t, where, fmt.Sprintf("%v\n%+v", err, status.Convert(err).Proto()), canary.Value)
				st := status.Convert(err)
				if st.Code() != want {
					t.Errorf("%s: code %s, want %s as for the hook's own error", where, st.Code(), want)
				}
				if !strings.Contains(st.Message(), `hook "leaky" UpdatePhysical Secret: the hook `) || !strings.Contains(st.Message(), "is withheld (detail ") {
					t.Errorf("%s: message %q does not name the hook and the withheld detail", where, st.Message())
				}
			}
		})
	}
	t.Run("the log holds no form of the value", func(t *testing.T) {
		text := logs.String()
		if !strings.Contains(text, "hook chain failed") || !strings.Contains(text, "hook keeps failing") {
			t.Errorf("the log lacks the failure lines, so it proves nothing:\n%s", text)
		}
		canary.Check(t, "the log", text, canary.Value)
	})
}
