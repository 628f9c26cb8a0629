package bridgev2

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
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
	// Log receives Initialize, SetLeader, undo key and the stuck-slots lines; its V(1) gets
	// one line per Mutate call (no object data), failures included. Default logr.Discard().
	Log logr.Logger

	// Keys, when set and holding no Ring yet, makes Initialize read the undo key ring from
	// the managed key Secret in the vcluster's host namespace, or create it (package
	// undokey), with the host kubeconfig vcluster passes in its InitConfig; the Secret is then
	// kept in step until Close. It should be the Keeper of the runner's Registry
	// (engine.RegistryOptions.Keys). The kinds an earlier process sealed undos on (the
	// Secret's kinds) get their read types announced by GetPluginConfig
	// (engine.Registry.CoverUndoReads). Default nil: Initialize reads no Secret.
	Keys *undo.Keeper
	// KeySecretName is the name of the key Secret. Default undokey.DefaultSecretName.
	KeySecretName string
	// KeyTimeout is how long Initialize waits for the key Secret, and bounds each request to
	// the host apiserver. When the Secret is not read in time Initialize answers anyway (a host
	// that cannot be reached must not stop vcluster's start), logs one line and calls
	// OnKeyFallback, and the Server keeps trying in the background. Default DefaultKeyTimeout
	// (5 s).
	KeyTimeout time.Duration
	// KeyRetry is the first wait before trying the key Secret again after Initialize went on
	// without it; it doubles after each failure up to MaxKeyRetry. Default DefaultKeyRetry
	// (5 s).
	KeyRetry time.Duration
	// OnKeyFallback, when set, is called once when Initialize answers without the key Secret,
	// so that hooked writes are refused (undo.ErrNeedsKey, FailedPrecondition): the host
	// did not answer in time or refused (the Server keeps trying in the background, and writes
	// go through, sealed, once a try succeeds), or the InitConfig
	// names no usable host (no kubeconfig, no currentNamespace, a kubeconfig that does not
	// load: no retry). Typically it counts this in a metric.
	OnKeyFallback func()

	// Namespaces, when set, is configured by Initialize with the virtual cluster's kubeconfig
	// (the InitConfig's syncerConfig) and handed to every Mutate's hooks as their
	// namespaces.Source (Virtual: the objects of physical types are host objects). It starts
	// watching only when a hook first looks a namespace up. Default nil: hooks get none.
	Namespaces *namespaces.Cache

	// Host, when set, is called once by Initialize with the host cluster's client config (the
	// InitConfig's workloadConfig, else physicalClusterConfig) and the vcluster's host
	// namespace (currentNamespace): the sidecar gives it its params from the host cluster
	// (package paramsource). An InitConfig without them calls nothing (logged). Default nil.
	Host func(config *rest.Config, hostNamespace string) error
}

// Defaults of the undo key options.
const (
	// DefaultKeyTimeout is Options.KeyTimeout's default: 5 s.
	DefaultKeyTimeout = 5 * time.Second
	// DefaultKeyRetry is Options.KeyRetry's default: 5 s.
	DefaultKeyRetry = 5 * time.Second
	// MaxKeyRetry bounds the wait between two tries of the key Secret: 5 min.
	MaxKeyRetry = 5 * time.Minute
)

// Server implements pluginv2.PluginServer for one engine.Registry. Create it with New; the
// Registry must not change after that, except by Initialize (Options.Keys), which vcluster
// calls before any other method. A Server is safe for concurrent use. Close ends its
// background work.
type Server struct {
	pluginv2.UnimplementedPluginServer

	opts    Options
	runner  *engine.Runner
	mutator *bridge.Mutator
	config  atomic.Pointer[string]
	slots   *metrics.SlotCheck // nil: off

	// ctx lives until Close: the key Secret's Manager and retries run under it.
	ctx      context.Context
	stop     context.CancelFunc
	keysOnce sync.Once
	hostOnce sync.Once
}

// pluginConfig is the JSON that GetPluginConfig answers (vcluster's v2 PluginConfig).
type pluginConfig struct {
	ClientHooks  []bridge.ClientHook `json:"clientHooks"`
	Interceptors struct{}            `json:"interceptors"`
}

// New returns a Server that runs Mutate calls with runner, with opts (defaults applied).
func New(runner *engine.Runner, opts Options) (*Server, error) {
	opts.MaxMessageBytes = cmp.Or(max(opts.MaxMessageBytes, 0), bridge.DefaultMaxMessageBytes)
	opts.StuckSlotsFactor = cmp.Or(opts.StuckSlotsFactor, metrics.DefaultStuckSlotsFactor)
	opts.KeySecretName = cmp.Or(opts.KeySecretName, undokey.DefaultSecretName)
	opts.KeyTimeout = cmp.Or(max(opts.KeyTimeout, 0), DefaultKeyTimeout)
	opts.KeyRetry = cmp.Or(max(opts.KeyRetry, 0), DefaultKeyRetry)
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
	s := &Server{opts: opts, runner: runner, mutator: m}
	if err := s.encodeConfig(); err != nil {
		return nil, fmt.Errorf("vcluster plugin v2: %w", err)
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	if opts.StuckSlotsFactor > 0 {
		timeout := opts.RequestTimeout
		timeout = cmp.Or(max(timeout, 0), bridge.DefaultRequestTimeout)
		s.slots = metrics.NewSlotCheck(runner, time.Duration(opts.StuckSlotsFactor)*timeout, opts.Log)
	}
	return s, nil
}

// encodeConfig stores the JSON of the Mutator's client hooks for GetPluginConfig.
func (s *Server) encodeConfig() error {
	cfg := pluginConfig{ClientHooks: s.mutator.ClientHooks()}
	if cfg.ClientHooks == nil {
		cfg.ClientHooks = []bridge.ClientHook{}
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode plugin config: %w", err)
	}
	text := string(data)
	s.config.Store(&text)
	return nil
}

// PluginConfig returns the JSON that GetPluginConfig answers:
// {"clientHooks":[{"apiVersion","kind","types":[...]}],"interceptors":{}}.
func (s *Server) PluginConfig() string { return *s.config.Load() }

// Close ends the Server's background work (the key Secret's Manager and its retries). Serve
// calls it when vcluster ends the plugin; it may be called more than once.
func (s *Server) Close() { s.stop() }

// Initialize implements pluginv2.PluginServer. vcluster blocks its start on it (without a
// deadline), so it answers within Options.KeyTimeout at most: the registry was built before
// the handshake. With Options.Keys it reads the undo key Secret first (loadKeys); the first
// call only. The request's config (kubeconfigs and vcluster's own config) is never logged.
func (s *Server) Initialize(ctx context.Context, req *pluginv2.Initialize_Request) (*pluginv2.Initialize_Response, error) {
	s.opts.Log.Info("initialized by vcluster")
	if s.opts.Namespaces != nil {
		if err := s.configureNamespaces(req.GetConfig()); err != nil {
			s.opts.Log.Error(err, "no namespace cache: hooks that read the tenant's namespace (labels fromNamespace) fail their requests")
		}
	}
	if s.opts.Host != nil {
		s.hostOnce.Do(func() {
			rc, namespace, err := hostConfig(req.GetConfig())
			if err == nil {
				err = s.opts.Host(rc, namespace)
			}
			if err != nil {
				s.opts.Log.Error(err, "no host cluster for policy params: policies with hostParams fail their requests")
			}
		})
	}
	if s.opts.Keys != nil {
		s.keysOnce.Do(func() { s.loadKeys(ctx, req.GetConfig()) })
	}
	return &pluginv2.Initialize_Response{}, nil
}

// configureNamespaces points Options.Namespaces at the virtual cluster of the InitConfig JSON
// config (its syncerConfig kubeconfig). Its errors say what is missing, never the config.
func (s *Server) configureNamespaces(config string) error {
	ic, err := parseInitConfig(config)
	if err != nil {
		return err
	}
	if len(ic.SyncerConfig) == 0 {
		return errors.New("the Initialize config has no virtual cluster kubeconfig (syncerConfig)")
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(ic.SyncerConfig)
	if err != nil {
		return errors.New("the virtual cluster kubeconfig in the Initialize config does not load")
	}
	rc.UserAgent = "synchook-plugin"
	s.opts.Namespaces.Configure(rc)
	return nil
}

// initConfig holds the fields of vcluster's InitConfig (pkg/plugin/v2/config.go) that
// loadKeys uses; the kubeconfigs are base64 in the JSON.
type initConfig struct {
	SyncerConfig          []byte `json:"syncerConfig,omitempty"` // the virtual cluster's
	WorkloadConfig        []byte `json:"workloadConfig,omitempty"`
	PhysicalClusterConfig []byte `json:"physicalClusterConfig,omitempty"`
	CurrentNamespace      string `json:"currentNamespace,omitempty"`
}

// parseInitConfig decodes the InitConfig JSON config; its error never quotes the config.
func parseInitConfig(config string) (initConfig, error) {
	var ic initConfig
	if err := json.Unmarshal([]byte(config), &ic); err != nil {
		return initConfig{}, errors.New("the Initialize config is not the JSON of vcluster's InitConfig")
	}
	return ic, nil
}

// loadKeys starts undokey on the host named by the InitConfig JSON config and waits up to
// KeyTimeout for it. On success in time it announces the reads of the kinds undos were
// sealed on; else it logs one line, calls OnKeyFallback and leaves the tries to go on in the
// background (keepTrying).
func (s *Server) loadKeys(ctx context.Context, config string) {
	log := s.opts.Log.WithValues("secret", s.opts.KeySecretName)
	if s.opts.Keys.Ring() != nil {
		log.V(1).Info("undo key ring given: the key Secret is not read", "keyIDs", s.opts.Keys.Ring().IDs())
		return
	}
	fallback := func(err error, msg string, kv ...any) {
		log.Error(err, msg+": hooked writes are refused (FailedPrecondition) until the undo key Secret is read", kv...)
		if s.opts.OnKeyFallback != nil {
			s.opts.OnKeyFallback()
		}
	}
	c, namespace, err := s.hostClient(config)
	if err != nil {
		fallback(err, "no undo key Secret")
		return
	}
	log = log.WithValues("namespace", namespace)

	// The first try's result goes to this call while it waits; after that, results are late
	// and keepTrying logs them itself.
	var mu sync.Mutex
	waiting, first := true, make(chan error, 1)
	report := func(err error) (late bool) {
		mu.Lock()
		defer mu.Unlock()
		if !waiting {
			return true
		}
		first <- err
		waiting = false
		return false
	}
	go s.keepTrying(c, namespace, log, report)

	timer := time.NewTimer(s.opts.KeyTimeout)
	defer timer.Stop()
	select {
	case err = <-first:
	case <-timer.C:
		err = fmt.Errorf("no answer within %s", s.opts.KeyTimeout)
	case <-ctx.Done():
		err = fmt.Errorf("vcluster's Initialize call ended: %w", ctx.Err())
	}
	mu.Lock()
	if waiting {
		waiting = false // gave up: what arrives from now on is late
	} else if len(first) > 0 {
		err = <-first // arrived as this call gave up: not late
	}
	mu.Unlock()
	if err != nil {
		fallback(err, "could not read or create the undo key Secret; trying again in the background", "retryIn", s.opts.KeyRetry.String())
		return
	}
	s.coverUndoReads(log)
}

// keepTrying calls undokey.Start until it succeeds or the Server is closed, waiting KeyRetry
// (doubling, up to MaxKeyRetry) between tries. It hands each result to report until report
// says the caller no longer waits; a late success logs the kinds whose reads could not be
// announced any more.
func (s *Server) keepTrying(c client.Client, namespace string, log logr.Logger, report func(error) (late bool)) {
	wait := s.opts.KeyRetry
	for attempt := 1; ; attempt++ {
		_, err := undokey.Start(s.ctx, undokey.Options{
			Client: c, Namespace: namespace, Name: s.opts.KeySecretName, Keeper: s.opts.Keys, Log: log,
		})
		late := report(err)
		if err == nil {
			if late {
				log.Info("read the undo key Secret after Initialize: undos are sealed from now on", "attempts", attempt)
				s.logUncovered(log)
			}
			return
		}
		if s.ctx.Err() != nil {
			return
		}
		if late {
			log.V(1).Info("undo key Secret: try failed", "attempts", attempt, "retryIn", wait.String(), "error", err.Error())
		}
		timer := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		wait = min(2*wait, MaxKeyRetry)
	}
}

// hostClient returns a client of the host apiserver for Secrets, from the InitConfig JSON
// config (workloadConfig, else physicalClusterConfig), and the vcluster's host namespace. Its
// errors say what is missing, never the config's content.
func (s *Server) hostClient(config string) (client.Client, string, error) {
	rc, namespace, err := hostConfig(config)
	if err != nil {
		return nil, "", err
	}
	rc.Timeout = s.opts.KeyTimeout
	// Only Secrets are read: a fixed mapping, no discovery round trip.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	c, err := client.New(rc, client.Options{Mapper: mapper})
	if err != nil {
		return nil, "", fmt.Errorf("host client: %w", err)
	}
	return c, namespace, nil
}

// hostConfig returns the host cluster's client config from the InitConfig JSON config
// (workloadConfig, else physicalClusterConfig) and the vcluster's host namespace. Its errors
// say what is missing, never the config's content.
func hostConfig(config string) (*rest.Config, string, error) {
	ic, err := parseInitConfig(config)
	if err != nil {
		return nil, "", err
	}
	kubeconfig := ic.WorkloadConfig
	if len(kubeconfig) == 0 {
		kubeconfig = ic.PhysicalClusterConfig
	}
	if len(kubeconfig) == 0 {
		return nil, "", errors.New("the Initialize config has no host kubeconfig (workloadConfig, physicalClusterConfig)")
	}
	if ic.CurrentNamespace == "" {
		return nil, "", errors.New("the Initialize config has no currentNamespace")
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, "", errors.New("the host kubeconfig in the Initialize config does not load")
	}
	rc.UserAgent = "synchook-plugin"
	return rc, ic.CurrentNamespace, nil
}

// coverUndoReads registers the read types of the kinds the Keeper knows undos were sealed on
// and announces them (GetPluginConfig). It runs in Initialize, before vcluster sends Mutate.
func (s *Server) coverUndoReads(log logr.Logger) {
	added := s.runner.Registry().CoverUndoReads(s.opts.Keys.SealedKinds())
	if len(added) == 0 {
		return
	}
	if err := s.mutator.Refresh(); err != nil {
		log.Error(err, "could not announce the reads of kinds an undo was sealed on")
		return
	}
	if err := s.encodeConfig(); err != nil {
		log.Error(err, "could not announce the reads of kinds an undo was sealed on")
		return
	}
	names := make([]string, len(added))
	for i, k := range added {
		names[i] = k.String()
	}
	log.Info("announcing reads of kinds an undo was sealed on", "added", names)
}

// logUncovered logs the kinds an undo was sealed on whose read type is not announced: after
// Initialize it is too late to add them (vcluster has read the plugin config), so their undos
// stay on the objects until the plugin starts again.
func (s *Server) logUncovered(log logr.Logger) {
	var missing []string
	for _, k := range s.opts.Keys.SealedKinds() {
		if !s.runner.Registry().Has(k.GVK, hooks.HookTypeOf(k.Side, hooks.OpGet)) {
			missing = append(missing, k.String())
		}
	}
	if len(missing) > 0 {
		log.Info("kinds an undo was sealed on are read without taking it off until the plugin restarts", "kinds", missing)
	}
}

// GetPluginConfig implements pluginv2.PluginServer: the client hooks (PluginConfig).
func (s *Server) GetPluginConfig(context.Context, *pluginv2.GetPluginConfig_Request) (*pluginv2.GetPluginConfig_Response, error) {
	return &pluginv2.GetPluginConfig_Response{Config: s.PluginConfig()}, nil
}

// SetLeader implements pluginv2.PluginServer; hooks run on leaders and followers alike.
func (s *Server) SetLeader(context.Context, *pluginv2.SetLeader_Request) (*pluginv2.SetLeader_Response, error) {
	s.opts.Log.V(1).Info("syncer became leader")
	return &pluginv2.SetLeader_Response{}, nil
}

// Mutate implements pluginv2.PluginServer with bridge.Mutator.Mutate: mutated=false when
// nothing changed, else the whole object; hook failures are gRPC errors (bridge.StatusCode).
func (s *Server) Mutate(ctx context.Context, req *pluginv2.Mutate_Request) (*pluginv2.Mutate_Response, error) {
	if s.opts.Namespaces != nil {
		ctx = namespaces.WithSource(ctx, namespaces.Source{Lookup: s.opts.Namespaces, Virtual: true})
	}
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
	defer s.Close()
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
