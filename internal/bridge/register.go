package bridge

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/synchook/synchook/internal/bridge/remote"
)

// callTimeout bounds one IsLeader or RegisterPlugin call.
const callTimeout = 5 * time.Second

// registration is what keepRegistered knows about vcluster.
type registration struct {
	registered bool
	runID      string // of the vcluster process we registered with
}

// keepRegistered registers the plugin with vcluster's plugin server, and registers it again
// whenever vcluster's run ID changes (vcluster restarted and forgot its plugins), until ctx
// ends; then it returns nil.
//
// Every PollInterval it asks IsLeader for the run ID first and registers when the ID is new:
// in that order, a vcluster that restarts between the two calls is registered with and then
// seen with a new ID, which costs one extra registration; the other order could remember the
// new ID without having registered with it. While vcluster cannot be reached (it may start
// after us) the waits back off from 100 ms to MaxBackoff.
func (b *Bridge) keepRegistered(ctx context.Context, advertised string) error {
	conn, err := grpc.NewClient(dialTarget(b.opts.VClusterAddress),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableServiceConfig(), // no DNS TXT lookups for a service config
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: initialBackoff, Multiplier: 2, Jitter: 0.2, MaxDelay: b.opts.MaxBackoff},
			MinConnectTimeout: callTimeout,
		}),
	)
	if err != nil {
		return fmt.Errorf("vcluster plugin server %q: %w", b.opts.VClusterAddress, err)
	}
	defer conn.Close()
	client := remote.NewVClusterClient(conn)
	req := &remote.RegisterPluginRequest{Version: PluginVersion, Name: b.opts.Name, Address: advertised, ClientHooks: b.hooks}
	log := b.opts.Log.WithValues("vcluster", b.opts.VClusterAddress)

	var (
		st       registration
		wait     = initialBackoff
		failures int
	)
	for {
		next := b.opts.PollInterval
		if err := b.register(ctx, client, req, &st); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			if failures == 1 {
				log.Info("vcluster plugin server not reachable, retrying", "error", err.Error(), "registered", st.registered)
			} else {
				log.V(1).Info("vcluster plugin server still not reachable", "error", err.Error(), "attempts", failures, "retryIn", wait.String())
			}
			next, wait = wait, min(2*wait, b.opts.MaxBackoff)
		} else {
			failures, wait = 0, initialBackoff
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// register asks vcluster for its run ID and registers the plugin when it has not registered
// with that run yet.
func (b *Bridge) register(ctx context.Context, client remote.VClusterClient, req *remote.RegisterPluginRequest, st *registration) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	info, err := client.IsLeader(ctx, &remote.Empty{})
	if err != nil {
		return fmt.Errorf("IsLeader: %w", err)
	}
	if st.registered && info.GetRunID() == st.runID {
		return nil
	}
	if _, err := client.RegisterPlugin(ctx, req); err != nil {
		return fmt.Errorf("RegisterPlugin: %w", err)
	}
	b.opts.Log.Info("registered with vcluster", "vcluster", b.opts.VClusterAddress, "runID", info.GetRunID(),
		"again", st.registered, "leader", info.GetLeader(), "name", req.GetName(), "address", req.GetAddress(),
		"clientHooks", len(req.GetClientHooks()))
	st.registered, st.runID = true, info.GetRunID()
	return nil
}
