package hookclient_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synchook/synchook/hookclient"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/canary"
)

// TestASecretCanaryReachesTheClientInNoForm runs a Secret whose hook fails in every way
// canary.Leaks knows through a real sidecar, and searches the error the client returns for the
// value in every encoding.
func TestASecretCanaryReachesTheClientInNoForm(t *testing.T) {
	s := startSidecar(t, registry(t, canary.Hook("leaky", hooks.UpdatePhysical)), "", nil)
	c := newClient(t, s, hookclient.Options{})
	for i, leak := range canary.Leaks {
		t.Run(leak.Name, func(t *testing.T) {
			err := c.Mutate(t.Context(), hooks.UpdatePhysical, canary.Secret(i))
			if err == nil {
				t.Fatal("the failing hook did not fail the call")
			}
			canary.Check(t, "the client's error", fmt.Sprintf("%v\n%+v\n%#v", err, err, err), canary.Value)
			if !strings.Contains(err.Error(), `hook "leaky" UpdatePhysical Secret: the hook `) || !strings.Contains(err.Error(), "is withheld (detail ") {
				t.Errorf("error %q does not name the hook and the withheld detail", err)
			}
		})
	}
}
