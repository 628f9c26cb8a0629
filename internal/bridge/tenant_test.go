package bridge_test

import (
	"context"
	"testing"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/tenanttest"
	"github.com/synchook/synchook/internal/vclusterstub"
	"github.com/synchook/synchook/webhook"
)

// TestTenantAttacksOverPluginV1 runs the tenant attack suite against a Bridge of
// tenanttest.Config (undo on, messages up to the binary's 3 MiB, tenanttest.RequestTimeout)
// registered with a vcluster stand-in, each call on a new gRPC connection as vcluster makes it.
func TestTenantAttacksOverPluginV1(t *testing.T) {
	_, p := startBridge(t, tenanttest.Registry(t), bridge.Options{
		MaxMessageBytes: webhook.DefaultMaxRequestBytes, RequestTimeout: tenanttest.RequestTimeout,
	})
	m := tenanttest.VClusterMutator(func(ctx context.Context, apiVersion, kind string, typ hooks.HookType, object string) (string, bool, error) {
		res, err := vclusterstub.Mutate(ctx, p.GetAddress(), &remote.MutateRequest{ApiVersion: apiVersion, Kind: kind, Type: string(typ), Object: object})
		return res.GetObject(), res.GetMutated(), err
	})
	tenanttest.Run(t, tenanttest.Transport{Mutate: m, Lists: false})
	t.Run("a malformed undo on one item of a List read item by item, as vcluster reads it, does not fail the read", func(t *testing.T) {
		tenanttest.ReadListItemByItem(t, m)
	})
}
