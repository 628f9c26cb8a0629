// Package vclusterstub is a test-only stand-in for vcluster's side of the plugin v1 protocol:
// its plugin server (remote.VCluster: RegisterPlugin, GetContext, IsLeader and the deprecated
// Register) and the way vcluster calls a plugin's Mutate — a new gRPC connection per call, a
// 10 s deadline, the JSON of its typed object, and json.Unmarshal of the answer INTO that
// object.
//
// It follows the behaviour of vcluster's pkg/plugin/v1 (run ID random per process, plugins
// keyed by name, client hooks keyed by apiVersion, kind and type); it is not vcluster.
package vclusterstub

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/synchook/synchook/internal/bridge/remote"
)

// MutateTimeout is the deadline vcluster gives every Mutate call.
const MutateTimeout = 10 * time.Second

// Server is the stand-in for vcluster's plugin server. Create it with Start.
type Server struct {
	remote.UnimplementedVClusterServer

	addr string

	mu            sync.Mutex
	runID         string
	plugins       map[string]*remote.RegisterPluginRequest // registered with this run, by name
	registrations int                                      // over every run
	polls         int                                      // IsLeader calls, over every run
	changed       chan struct{}                            // closed and replaced on each registration and poll
	srv           *grpc.Server
	served        chan struct{} // closed when srv.Serve returns
}

// Start serves the VCluster service on addr ("127.0.0.1:0" picks a free port) with a new run
// ID, and stops it when t ends.
func Start(t testing.TB, addr string) *Server {
	t.Helper()
	s := &Server{addr: addr, changed: make(chan struct{})}
	if err := s.listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) listen() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("vclusterstub: listen %s: %w", s.addr, err)
	}
	srv := grpc.NewServer()
	remote.RegisterVClusterServer(srv, s)
	served := make(chan struct{})
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.runID = newRunID()
	s.plugins = map[string]*remote.RegisterPluginRequest{}
	s.srv, s.served = srv, served
	s.mu.Unlock()
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	return nil
}

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// RunID returns the run ID of the current run.
func (s *Server) RunID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runID
}

// Stop stops serving (at once, as a killed vcluster would). It is safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, served := s.srv, s.served
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Stop()
		<-served
	}
}

// Restart stops the server and starts it again on the same address with a new run ID and no
// plugins, as a restarted vcluster: its plugins must register again.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.listen()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Registrations returns the number of RegisterPlugin calls with a name, over every run.
func (s *Server) Registrations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registrations
}

// Polls returns the number of IsLeader calls (a plugin's poll for the run ID), over every run.
func (s *Server) Polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// WaitForPolls waits until IsLeader has been called n times in all, so that a test can let a
// plugin poll a given number of times instead of sleeping. It fails when ctx ends first.
func (s *Server) WaitForPolls(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		polls, changed := s.polls, s.changed
		s.mu.Unlock()
		if polls >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("vclusterstub: %d of %d polls: %w", polls, n, ctx.Err())
		case <-changed:
		}
	}
}

// Plugin returns the registration of name in the current run, or nil.
func (s *Server) Plugin(name string) *remote.RegisterPluginRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plugins[name]
}

// WaitForPlugin waits until name has registered with the current run, as vcluster does before
// it starts syncing, and returns its registration. It fails when ctx ends first.
func (s *Server) WaitForPlugin(ctx context.Context, name string) (*remote.RegisterPluginRequest, error) {
	for {
		s.mu.Lock()
		p, changed := s.plugins[name], s.changed
		s.mu.Unlock()
		if p != nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("vclusterstub: plugin %q did not register: %w", name, ctx.Err())
		case <-changed:
		}
	}
}

// RegisterPlugin records the plugin under its name, replacing an earlier registration, and
// rejects client hooks without apiVersion or kind, as vcluster does.
func (s *Server) RegisterPlugin(_ context.Context, req *remote.RegisterPluginRequest) (*remote.RegisterPluginResult, error) {
	if req.GetName() == "" {
		return &remote.RegisterPluginResult{}, nil
	}
	for _, h := range req.GetClientHooks() {
		if h.GetApiVersion() == "" || h.GetKind() == "" {
			return nil, fmt.Errorf("api version or kind is empty in plugin %s hook", req.GetName())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plugins[req.GetName()] = proto.CloneOf(req)
	s.registrations++
	close(s.changed)
	s.changed = make(chan struct{})
	return &remote.RegisterPluginResult{}, nil
}

// IsLeader answers leader=true and the run ID, and counts the call (Polls).
func (s *Server) IsLeader(context.Context, *remote.Empty) (*remote.LeaderInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	close(s.changed)
	s.changed = make(chan struct{})
	return &remote.LeaderInfo{Leader: true, RunID: s.runID}, nil
}

// GetContext answers a context with namespaces only.
func (s *Server) GetContext(context.Context, *remote.Empty) (*remote.Context, error) {
	return &remote.Context{TargetNamespace: "vcluster-host", CurrentNamespace: "vcluster", Options: "{}"}, nil
}

// Register (deprecated) records a plugin by name only.
func (s *Server) Register(ctx context.Context, info *remote.PluginInfo) (*remote.Context, error) {
	if _, err := s.RegisterPlugin(ctx, &remote.RegisterPluginRequest{Name: info.GetName()}); err != nil {
		return nil, err
	}
	return s.GetContext(ctx, &remote.Empty{})
}

// MutateObject does what vcluster does before it writes (or after it reads) obj: for every
// plugin of the current run registered for (obj's apiVersion and kind, hookType) it calls
// Mutate with the JSON of obj (each plugin gets the previous one's answer), then decodes the
// last answer with json.Unmarshal into obj. It reports the number of plugins called.
func (s *Server) MutateObject(ctx context.Context, obj client.Object, hookType string) (int, error) {
	gvk, err := apiutil.GVKForObject(obj, clientgoscheme.Scheme)
	if err != nil {
		return 0, err
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	var addresses []string
	s.mu.Lock()
	for _, p := range s.plugins {
		for _, h := range p.GetClientHooks() {
			if h.GetApiVersion() == apiVersion && h.GetKind() == kind && slices.Contains(h.GetTypes(), hookType) {
				addresses = append(addresses, p.GetAddress())
			}
		}
	}
	s.mu.Unlock()
	if len(addresses) == 0 {
		return 0, nil
	}
	encoded, err := json.Marshal(obj)
	if err != nil {
		return 0, fmt.Errorf("encode obj: %w", err)
	}
	for _, addr := range addresses {
		res, err := Mutate(ctx, addr, &remote.MutateRequest{ApiVersion: apiVersion, Kind: kind, Object: string(encoded), Type: hookType})
		if err != nil {
			return 0, fmt.Errorf("call plugin at %s: %w", addr, err)
		}
		if res.GetMutated() {
			encoded = []byte(res.GetObject())
		}
	}
	if err := json.Unmarshal(encoded, obj); err != nil {
		return 0, fmt.Errorf("unmarshal obj: %w", err)
	}
	return len(addresses), nil
}

// Mutate makes one Mutate call to the plugin at address the way vcluster does: a new client
// connection for this call only, insecure, with a MutateTimeout deadline.
func Mutate(ctx context.Context, address string, req *remote.MutateRequest) (*remote.MutateResult, error) {
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial plugin %s: %w", address, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, MutateTimeout)
	defer cancel()
	return remote.NewPluginClient(conn).Mutate(ctx, req)
}

// newRunID returns 12 random characters, like vcluster's run ID.
func newRunID() string { return rand.Text()[:12] }
