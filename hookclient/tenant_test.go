package hookclient_test

import (
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hookclient"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/tenanttest"
	"github.com/synchook/synchook/webhook"
)

// hookclientMutator calls c as the syncer does: Mutate on a *corev1.Pod, MutateList on a
// *corev1.PodList (one request for the List), each decoded from obj. The result is obj with the
// change made to the typed object (tenanttest.Retyped).
func hookclientMutator(c *hookclient.Client) tenanttest.Mutator {
	return func(t *testing.T, typ hooks.HookType, gvk schema.GroupVersionKind, obj []byte) ([]byte, error) {
		t.Helper()
		var mutate func() error
		var typed any
		switch gvk {
		case tenanttest.PodGVK:
			pod := &corev1.Pod{}
			typed, mutate = pod, func() error { return c.Mutate(t.Context(), typ, pod) }
		case tenanttest.PodListGVK:
			list := &corev1.PodList{}
			typed, mutate = list, func() error { return c.MutateList(t.Context(), typ, list) }
		default:
			obj := tenanttest.Typed(t, gvk)
			typed, mutate = obj, func() error { return c.Mutate(t.Context(), typ, obj) }
		}
		if err := json.Unmarshal(obj, typed); err != nil {
			t.Fatal(err)
		}
		before, err := json.Marshal(typed)
		if err != nil {
			t.Fatal(err)
		}
		if err := mutate(); err != nil {
			return nil, err
		}
		after, err := json.Marshal(typed)
		if err != nil {
			t.Fatal(err)
		}
		return tenanttest.Retyped(t, obj, before, after), nil
	}
}

// TestTenantAttacksThroughHookclient runs the tenant attack suite through a hookclient.Client
// against a webhook Server of tenanttest.Config (undo on, as the binary runs, its request
// timeout tenanttest.RequestTimeout) over HTTPS on a loopback port. Every call has the timeout
// tenanttest.CallTimeout (sent as ?timeout=) and the Fail policy for every hook type, so that a
// sidecar that failed or timed out is an error here rather than an unmutated object under
// Get's default Ignore.
func TestTenantAttacksThroughHookclient(t *testing.T) {
	reg := tenanttest.Registry(t)
	ws, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{RequestTimeout: tenanttest.RequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	// startSidecar's TLS listener and counters, serving ws instead of its own server.
	s := startSidecar(t, reg, "", func(http.Handler) http.Handler { return ws.Handler() })
	policies := map[hooks.HookType]hookclient.FailurePolicy{}
	for _, typ := range hooks.AllHookTypes() {
		policies[typ] = hookclient.Fail
	}
	c := newClient(t, s, hookclient.Options{Timeout: tenanttest.CallTimeout, FailurePolicies: policies})
	tenanttest.Run(t, tenanttest.Transport{Mutate: hookclientMutator(c), Lists: true})
	for _, typ := range []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical, hooks.UpdateVirtual, hooks.GetPhysical, hooks.GetVirtual} {
		if s.count("/mutate/"+string(typ)) == 0 {
			t.Errorf("no %s request reached the sidecar: the suite did not go through it", typ)
		}
	}
}
