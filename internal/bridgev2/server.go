package bridgev2

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/metrics"
)

// Handshake is go-plugin's handshake of vcluster plugin v2: protocol version 1 and the magic
// cookie VCLUSTER_PLUGIN=vcluster, which vcluster puts in the plugin's environment.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "VCLUSTER_PLUGIN",
	MagicCookieValue: "vcluster",
}

// PluginName is the key of the plugin in go-plugin's plugin set, as vcluster dispenses it.
const PluginName = "plugin"

// ConfigEnvVar is the environment variable in which vcluster passes plugins.<name>.config as
// YAML.
const ConfigEnvVar = "PLUGIN_CONFIG"

// Started reports whether this process was started by vcluster as a v2 plugin: the magic cookie
// is in the environment (read with getenv) and there are no arguments (args excludes the
// program name).
func Started(args []string, getenv func(string) string) bool {
	return len(args) == 0 && getenv(Handshake.MagicCookieKey) == Handshake.MagicCookieValue
}

// Options configures a Server. Zero fields take the defaults named on each.
type Options struct {
	// RequestTimeout bounds the hook chain of one Mutate call; vcluster's deadline (10 s) wins
	// when shorter. Default bridge.DefaultRequestTimeout (10 s).
	RequestTimeout time.Duration
	// MaxMessageBytes is the largest Mutate request accepted, in bytes; larger ones get
	// ResourceExhausted. Default bridge.DefaultMaxMessageBytes (4 MiB, gRPC's own default);
	// the synchook binary sets webhook.DefaultMaxRequestBytes (3 MiB), as serve does.
	MaxMessageBytes int
	// Metrics records every Mutate call that reaches a hook chain, when set. Default nil.
	Metrics *metrics.Recorder
	// StuckSlotsFactor is N of the stuck-slots check: a v2 plugin has no health endpoint
	// (vcluster runs it through go-plugin), so when every concurrency slot of the Runner has
	// been held longer than N × RequestTimeout, by hooks that ignore their context, it logs one
	// error naming those hooks (and one line when a slot is free again). It checks when a call
	// is refused as overloaded and, while stuck, on every call. Default
	// metrics.DefaultStuckSlotsFactor (3); < 0 turns the check off.
	StuckSlotsFactor int
	// Log receives Initialize, SetLeader and the stuck-slots lines; its V(1) gets one line per
	// Mutate call (no object data), failures included. Default logr.Discard().
	Log logr.Logger
}

// Server implements pluginv2.PluginServer for one engine.Registry. Create it with New; the
// Registry must not change after that. A Server is safe for concurrent use.
type Server struct {
	pluginv2.UnimplementedPluginServer

	opts    Options
	mutator *bridge.Mutator
	config  string
	slots   *metrics.SlotCheck // nil: off
}

// pluginConfig is the JSON that GetPluginConfig answers (vcluster's v2 PluginConfig).
type pluginConfig struct {
	ClientHooks  []bridge.ClientHook `json:"clientHooks"`
	Interceptors struct{}            `json:"interceptors"`
}

// New returns a Server that runs Mutate calls with runner, with opts (defaults applied).
func New(runner *engine.Runner, opts Options) (*Server, error) {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = bridge.DefaultMaxMessageBytes
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.StuckSlotsFactor == 0 {
		opts.StuckSlotsFactor = metrics.DefaultStuckSlotsFactor
	}
	m, err := bridge.NewMutator(runner, bridge.MutatorOptions{
		RequestTimeout: opts.RequestTimeout, Metrics: opts.Metrics, Transport: metrics.TransportPluginV2,
		// One line per call would go through vcluster's log (go-plugin re-logs every stderr
		// line) and cost both processes on every sync: per-call lines are debug here. A failed
		// call still reaches vcluster as an error naming the hook, which vcluster logs.
		Log: opts.Log.V(1),
	})
	if err != nil {
		return nil, fmt.Errorf("vcluster plugin v2: %w", err)
	}
	cfg := pluginConfig{ClientHooks: m.ClientHooks()}
	if cfg.ClientHooks == nil {
		cfg.ClientHooks = []bridge.ClientHook{}
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("vcluster plugin v2: encode plugin config: %w", err)
	}
	s := &Server{opts: opts, mutator: m, config: string(data)}
	if opts.StuckSlotsFactor > 0 {
		timeout := opts.RequestTimeout
		if timeout <= 0 {
			timeout = bridge.DefaultRequestTimeout
		}
		s.slots = metrics.NewSlotCheck(runner, time.Duration(opts.StuckSlotsFactor)*timeout, opts.Log)
	}
	return s, nil
}

// PluginConfig returns the JSON that GetPluginConfig answers:
// {"clientHooks":[{"apiVersion","kind","types":[...]}],"interceptors":{}}.
func (s *Server) PluginConfig() string { return s.config }

// Initialize implements pluginv2.PluginServer. vcluster blocks its start on it, so it answers at
// once: the registry was built before the handshake. The request's config (kubeconfigs and
// vcluster's own config) is not used and never logged.
func (s *Server) Initialize(context.Context, *pluginv2.Initialize_Request) (*pluginv2.Initialize_Response, error) {
	s.opts.Log.Info("initialized by vcluster")
	return &pluginv2.Initialize_Response{}, nil
}

// GetPluginConfig implements pluginv2.PluginServer: the client hooks (PluginConfig).
func (s *Server) GetPluginConfig(context.Context, *pluginv2.GetPluginConfig_Request) (*pluginv2.GetPluginConfig_Response, error) {
	return &pluginv2.GetPluginConfig_Response{Config: s.config}, nil
}

// SetLeader implements pluginv2.PluginServer; hooks run on leaders and followers alike.
func (s *Server) SetLeader(context.Context, *pluginv2.SetLeader_Request) (*pluginv2.SetLeader_Response, error) {
	s.opts.Log.V(1).Info("syncer became leader")
	return &pluginv2.SetLeader_Response{}, nil
}

// Mutate implements pluginv2.PluginServer with bridge.Mutator.Mutate: mutated=false when
// nothing changed, else the whole object; hook failures are gRPC errors (bridge.StatusCode).
func (s *Server) Mutate(ctx context.Context, req *pluginv2.Mutate_Request) (*pluginv2.Mutate_Response, error) {
	object, mutated, err := s.mutator.Mutate(ctx, req.GetApiVersion(), req.GetKind(), req.GetType(), req.GetObject())
	if s.slots != nil && (s.slots.Stuck() || status.Code(err) == codes.ResourceExhausted) {
		_ = s.slots.Check() // logs when every slot has just become stuck, or one is free again
	}
	if err != nil {
		return nil, err
	}
	return &pluginv2.Mutate_Response{Object: object, Mutated: mutated}, nil
}

// grpcPlugin is the go-plugin plugin that serves a pluginv2.PluginServer; the client half is
// vcluster's (ClientPlugin, for tests).
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	server pluginv2.PluginServer
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pluginv2.RegisterPluginServer(s, p.server)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pluginv2.NewPluginClient(c), nil
}

// ServeOptions are the process-level settings of Serve.
type ServeOptions struct {
	// Stderr receives go-plugin's own log lines (JSON, warnings and errors only). Default
	// os.Stderr. Stdout belongs to go-plugin's handshake.
	Stderr io.Writer
	// MaxMessageBytes bounds a request for ServePlugin (Serve uses the Server's Options).
	// Default bridge.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// DefaultServer serves with go-plugin's default gRPC server (goplugin.DefaultGRPCServer),
	// as a vcluster-sdk plugin does, instead of synchook's options; MaxMessageBytes is then
	// gRPC's default. For reference plugins in benchmarks.
	DefaultServer bool
	// Test, when set, serves in go-plugin's test mode: in process, ended by Test.Context, with
	// the connection details sent on Test.ReattachConfigCh instead of stdout (for tests).
	Test *goplugin.ServeTestConfig
}

// Serve serves s with go-plugin: it writes the handshake line to stdout and answers vcluster
// until vcluster ends the plugin (go-plugin's controller Shutdown), then returns. go-plugin
// takes over os.Stdout and os.Stderr while serving and forwards what is written to them to
// vcluster; write logs to a writer taken before Serve. It exits the process itself (code 1)
// when the magic cookie is missing, as go-plugin does for every plugin.
func Serve(s *Server, o ServeOptions) {
	o.MaxMessageBytes = s.opts.MaxMessageBytes
	ServePlugin(s, o)
}

// ServePlugin is Serve for any implementation of the service, with synchook's gRPC server
// options (bridge.ServerOptions) or, with o.DefaultServer, go-plugin's default server as
// vcluster-sdk plugins use it (the reference plugins of the benchmarks).
func ServePlugin(srv pluginv2.PluginServer, o ServeOptions) {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	newServer := func(opts []grpc.ServerOption) *grpc.Server {
		return grpc.NewServer(append(opts, bridge.ServerOptions(o.MaxMessageBytes)...)...)
	}
	if o.DefaultServer {
		newServer = goplugin.DefaultGRPCServer
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{PluginName: &grpcPlugin{server: srv}},
		GRPCServer:      newServer,
		Logger:          hclog.New(&hclog.LoggerOptions{Name: "go-plugin", Level: hclog.Warn, Output: o.Stderr, JSONFormat: true}),
		Test:            o.Test,
	})
}

// ClientPlugin returns the go-plugin plugin for the client side, which dispenses a
// pluginv2.PluginClient (what vcluster's manager does), for tests and benchmarks.
func ClientPlugin() goplugin.Plugin { return &grpcPlugin{} }
