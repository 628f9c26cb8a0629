package bridgev2_test

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/tenanttest"
	"github.com/synchook/synchook/webhook"
)

// v2PodMutator calls Mutate through the dispensed go-plugin client the way vcluster does: it
// sends the JSON of its typed object (the *corev1.Pod decoded from obj), waits
// tenanttest.CallTimeout, and when the answer says mutated it decodes the answer INTO that same
// object. The result is obj with the change the answer made to the typed object
// (tenanttest.Retyped).
func v2PodMutator(pc pluginv2.PluginClient) tenanttest.Mutator {
	return func(t *testing.T, typ hooks.HookType, gvk schema.GroupVersionKind, obj []byte) ([]byte, error) {
		t.Helper()
		if gvk != tenanttest.PodGVK {
			t.Fatalf("vcluster sends single objects; got %s", gvk)
		}
		pod := &corev1.Pod{}
		if err := json.Unmarshal(obj, pod); err != nil {
			t.Fatal(err)
		}
		sent, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), tenanttest.CallTimeout)
		defer cancel()
		apiVersion, kind := gvk.ToAPIVersionAndKind()
		res, err := pc.Mutate(ctx, &pluginv2.Mutate_Request{ApiVersion: apiVersion, Kind: kind, Type: string(typ), Object: string(sent)})
		if err != nil {
			return nil, err
		}
		if !res.GetMutated() {
			if res.GetObject() != "" {
				t.Errorf("mutated=false with an object")
			}
			return obj, nil
		}
		if err := json.Unmarshal([]byte(res.GetObject()), pod); err != nil {
			t.Fatalf("decode the answer into the sent pod, as vcluster does: %v", err)
		}
		after, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		return tenanttest.Retyped(t, obj, sent, after), nil
	}
}

// TestTenantAttacksOverPluginV2 runs the tenant attack suite against a v2 Server of
// tenanttest.Config (undo on, messages up to the binary's 3 MiB, tenanttest.RequestTimeout)
// through a real go-plugin connection, as vcluster's plugin manager dispenses it.
func TestTenantAttacksOverPluginV2(t *testing.T) {
	srv, err := bridgev2.New(engine.NewRunner(tenanttest.Registry(t), engine.RunnerOptions{}),
		bridgev2.Options{MaxMessageBytes: webhook.DefaultMaxRequestBytes, RequestTimeout: tenanttest.RequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	pc := dispenseServer(t, srv, io.Discard)
	m := v2PodMutator(pc)
	tenanttest.Run(t, tenanttest.Transport{Mutate: m, Lists: false})
	t.Run("a malformed undo on one item of a List read item by item, as vcluster reads it, does not fail the read", func(t *testing.T) {
		tenanttest.ReadListItemByItem(t, m)
	})
}
