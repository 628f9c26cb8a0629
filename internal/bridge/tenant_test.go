package bridge_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/tenanttest"
	"github.com/synchook/synchook/internal/vclusterstub"
	"github.com/synchook/synchook/webhook"
)

// vclusterPodMutator calls a plugin's Mutate the way vcluster does: it sends the JSON of its
// typed object (the *corev1.Pod decoded from obj), waiting tenanttest.CallTimeout, and when the
// answer says mutated it decodes the answer INTO that same object. The result is obj with the
// change the answer made to the typed object (tenanttest.Retyped).
func vclusterPodMutator(call func(context.Context, *remote.MutateRequest) (*remote.MutateResult, error)) tenanttest.Mutator {
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
		res, err := call(ctx, &remote.MutateRequest{ApiVersion: apiVersion, Kind: kind, Type: string(typ), Object: string(sent)})
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

// TestTenantAttacksOverPluginV1 runs the tenant attack suite against a Bridge of
// tenanttest.Config (undo on, messages up to the binary's 3 MiB, tenanttest.RequestTimeout)
// registered with a vcluster stand-in, each call on a new gRPC connection as vcluster makes it.
func TestTenantAttacksOverPluginV1(t *testing.T) {
	_, p := startBridge(t, tenanttest.Registry(t), bridge.Options{
		MaxMessageBytes: webhook.DefaultMaxRequestBytes, RequestTimeout: tenanttest.RequestTimeout,
	})
	call := func(ctx context.Context, req *remote.MutateRequest) (*remote.MutateResult, error) {
		return vclusterstub.Mutate(ctx, p.GetAddress(), req)
	}
	m := vclusterPodMutator(call)
	tenanttest.Run(t, tenanttest.Transport{Mutate: m, Lists: false})
	t.Run("a malformed undo on one item of a List read item by item, as vcluster reads it, does not fail the read", func(t *testing.T) {
		tenanttest.ReadListItemByItem(t, m)
	})
}
