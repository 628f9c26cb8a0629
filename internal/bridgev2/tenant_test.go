package bridgev2_test

import (
	"context"
	"io"
	"testing"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/tenanttest"
	"github.com/synchook/synchook/webhook"
)

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
	m := tenanttest.VClusterMutator(func(ctx context.Context, apiVersion, kind string, typ hooks.HookType, object string) (string, bool, error) {
		res, err := pc.Mutate(ctx, &pluginv2.Mutate_Request{ApiVersion: apiVersion, Kind: kind, Type: string(typ), Object: object})
		return res.GetObject(), res.GetMutated(), err
	})
	tenanttest.Run(t, tenanttest.Transport{Mutate: m, Lists: false})
	t.Run("a malformed undo on one item of a List read item by item, as vcluster reads it, does not fail the read", func(t *testing.T) {
		tenanttest.ReadListItemByItem(t, m)
	})
}
