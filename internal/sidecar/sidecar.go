package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/paramsource"
	"github.com/synchook/synchook/internal/policyreg"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
	"github.com/synchook/synchook/webhook"
)

// RegisterFunc adds compiled Go hooks to a registry after the config's hooks. It may be nil.
type RegisterFunc func(*engine.Registry) error

// Options configures Serve. Zero fields take the defaults named on each.
type Options struct {
	// ConfigFile is the path of the YAML hook config. Empty means the SYNCHOOK_CONFIG env var,
	// or config.Default() when that is empty too (no config when NoDefaultConfig is set).
	ConfigFile string
	// NoDefaultConfig runs no config hooks instead of config.Default() when no config is given:
	// a program with Go hooks of its own does not add the default label.
	NoDefaultConfig bool
	// Getenv reads environment variables. Default os.Getenv.
	Getenv func(string) string
	// Register adds compiled Go hooks after the config's hooks.
	Register RegisterFunc
	// Webhook configures the HTTPS server; its CertFile and KeyFile are filled from the
	// certificate options below.
	Webhook webhook.Options
	// CertDir is where the generated CA and serving cert live (tls.crt, tls.key, ca.crt).
	// Default "/tmp/synchook/certs". Ignored when TLSCertFile is set.
	CertDir string
	// CertDNSNames are extra SANs of the generated serving cert, on top of localhost,
	// 127.0.0.1 and ::1.
	CertDNSNames []string
	// TLSCertFile and TLSKeyFile name a user-supplied serving cert and key, used as they are.
	TLSCertFile, TLSKeyFile string
	// Bridge configures the vcluster plugin v1 bridge (gRPC, for real vcluster's legacy
	// plugin: sidecars). It runs next to the HTTPS server when Bridge.Address is set and is
	// off when it is empty. Its RequestTimeout and MaxMessageBytes default to
	// Webhook.RequestTimeout and Webhook.MaxRequestBytes; its Log is Log.WithName("bridge").
	Bridge bridge.Options
	// MetricsBindAddress is the host:port of the plain-HTTP /metrics listener. Default
	// DefaultMetricsBindAddress (":9441"); "0" disables it (metrics are still recorded).
	MetricsBindAddress string
	// MaxConcurrentHooks bounds the hook chains running at once, counting chains abandoned at
	// their deadline whose hook has not returned; past it requests get 429 / ResourceExhausted.
	// Default DefaultMaxConcurrentHooks (256).
	MaxConcurrentHooks int
	// Provenance turns on the synchook.io/mutated-by annotation (config provenance: true does
	// too); in plugin v2 mode also SYNCHOOK_PROVENANCE=true.
	Provenance bool
	// SkipIdempotencyCheck starts even when a chain changes its own result again (see
	// BuildRegistry); a warning is logged. In plugin v2 mode also SYNCHOOK_SKIP_IDEMPOTENCY_CHECK=true.
	SkipIdempotencyCheck bool
	// HookTimeout is each hook call's own deadline within the request's budget. Default 0 (only
	// the request deadline applies).
	HookTimeout time.Duration
	// UndoKeyFile is the path of the undo key ring file (package undo's ring text; a mounted
	// Secret's item) that seals and opens synchook.io/undo; a file that group or others may
	// write is refused. Empty: as a vcluster plugin v2, synchook manages a key Secret in its
	// host namespace (internal/undokey); serve takes its key from where it runs (see Serve:
	// a key Secret in UndoKeyNamespace, else a key file in CertDir). In plugin v2 mode also
	// the SYNCHOOK_UNDO_KEY_FILE env var.
	UndoKeyFile string
	// UndoKeyNamespace is the namespace of the undo key Secret that serve keeps without an
	// UndoKeyFile (internal/undokey, as a vcluster plugin v2 does). Default: the namespace in
	// ServiceAccountNamespaceFile (in a pod, its own); none there: not in a cluster, and the
	// key is a file in CertDir.
	UndoKeyNamespace string
	// UndoKeySecretName is the name of that Secret. Default undokey.DefaultSecretName.
	UndoKeySecretName string
	// ServiceAccountNamespaceFile is the file that holds the pod's namespace, read when
	// UndoKeyNamespace is empty; missing or empty: no namespace. Default
	// DefaultServiceAccountNamespaceFile.
	ServiceAccountNamespaceFile string
	// RESTConfig returns the client config of the cluster the undo key Secret is in. Default
	// ClusterConfig with Getenv.
	RESTConfig func() (*rest.Config, error)
	// UndoKinds are kinds (undo.Kind text, "v1/Pod physical") whose undo reads stay served
	// and announced after their last hook was removed, so that the undos sealed on their
	// objects keep being taken off until `synchook cleanup` has run. A vcluster plugin v2
	// remembers them in its key Secret itself; serve (admission, plugin v1) has no place of
	// its own on the host, so the platform lists them here (serve logs each kind it seals an
	// undo on for the first time). Default none.
	UndoKinds []string
	// Log is the root logger. Default logr.Discard().
	Log logr.Logger
	// CaptureDir, when set, makes the server write a sample of its requests there, one JSON
	// file each (package capture), for synchook replay. In plugin v2 mode also the
	// SYNCHOOK_CAPTURE_DIR env var. Default empty: no capture.
	CaptureDir string
	// CaptureSample is the fraction of requests captured, in (0, 1]. Default
	// capture.DefaultSample (0.01); in plugin v2 mode also SYNCHOOK_CAPTURE_SAMPLE.
	CaptureSample float64
	// CaptureMaxBytes bounds the total size of CaptureDir's files; the oldest are deleted first.
	// Default capture.DefaultMaxBytes (100 MiB); in plugin v2 mode also SYNCHOOK_CAPTURE_MAX_BYTES.
	CaptureMaxBytes int64
	// Version is the synchook version written in capture records (plugin.Version()).
	Version string
}

// Defaults of Options.
const (
	DefaultMetricsBindAddress = ":9441"
	DefaultMaxConcurrentHooks = 256
)

// ProvenanceEnvVar set to "true" turns provenance on in plugin v2 mode (no arguments there).
const ProvenanceEnvVar = "SYNCHOOK_PROVENANCE"

// MetricsBindAddressEnvVar names the environment variable that gives the vcluster plugin v2
// (which takes no flags) the host:port of a plain-HTTP /metrics listener; unset or "0": none (metrics are still recorded, loops
// still detected and logged).
const MetricsBindAddressEnvVar = "SYNCHOOK_METRICS_BIND_ADDRESS"

// SkipIdempotencyCheckEnvVar set to "true" skips the idempotency check in plugin v2 mode,
// where vcluster passes no arguments (plugins.<name> values can set env through the syncer).
const SkipIdempotencyCheckEnvVar = "SYNCHOOK_SKIP_IDEMPOTENCY_CHECK"

// The environment variables that turn capture on in plugin v2 mode (Options.CaptureDir,
// CaptureSample, CaptureMaxBytes), where vcluster passes no arguments.
const (
	CaptureDirEnvVar      = "SYNCHOOK_CAPTURE_DIR"
	CaptureSampleEnvVar   = "SYNCHOOK_CAPTURE_SAMPLE"
	CaptureMaxBytesEnvVar = "SYNCHOOK_CAPTURE_MAX_BYTES"
)

// DefaultCertDir is the default Options.CertDir.
const DefaultCertDir = "/tmp/synchook/certs"

// DefaultServiceAccountNamespaceFile is the default Options.ServiceAccountNamespaceFile: where
// Kubernetes mounts the namespace of a pod's service account.
const DefaultServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ErrConfig is wrapped by errors caused by bad configuration (exit code 2 in main).
var ErrConfig = errors.New("invalid configuration")

func (o *Options) setDefaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	o.CertDir = cmp.Or(o.CertDir, DefaultCertDir)
	o.MetricsBindAddress = cmp.Or(o.MetricsBindAddress, DefaultMetricsBindAddress)
	o.MaxConcurrentHooks = cmp.Or(max(o.MaxConcurrentHooks, 0), DefaultMaxConcurrentHooks)
	o.UndoKeySecretName = cmp.Or(o.UndoKeySecretName, undokey.DefaultSecretName)
	o.ServiceAccountNamespaceFile = cmp.Or(o.ServiceAccountNamespaceFile, DefaultServiceAccountNamespaceFile)
	if o.RESTConfig == nil {
		getenv := o.Getenv
		o.RESTConfig = func() (*rest.Config, error) { return ClusterConfig(getenv) }
	}
}

// RegistryConfig says where BuildRegistry finds hooks and how it checks them.
type RegistryConfig struct {
	// ConfigFile is the YAML hook config's path; empty: EnvVars in order, else the default.
	ConfigFile string
	// NoDefaultConfig makes "no config given" mean no config hooks rather than
	// config.Default(). Default false.
	NoDefaultConfig bool
	// EnvVars are the environment variables that may hold the config, in order. Default
	// [SYNCHOOK_CONFIG].
	EnvVars []string
	// Getenv reads them. Default os.Getenv.
	Getenv func(string) string
	// Register adds compiled Go hooks after the config's hooks. It may be nil.
	Register RegisterFunc
	// Keys holds the undo key ring (engine.RegistryOptions.Keys); nil: no key.
	Keys *undo.Keeper
	// SkipIdempotencyCheck skips running every chain twice on sample objects (a warning is
	// logged). Default false: a chain that changes its own result again stops the start.
	SkipIdempotencyCheck bool
	// Provenance turns on the synchook.io/mutated-by annotation even when the config's
	// provenance key does not (engine.RegistryOptions.Provenance).
	Provenance bool
	// Version is the build's version in that annotation. Default "dev".
	Version string
	// Samples are extra objects (JSON) to check idempotency on, next to the built-in ones
	// (mutate adds the object it was given).
	Samples [][]byte
	// Log receives "hooks loaded". Default logr.Discard().
	Log logr.Logger
	// HostParams is where policy entries with hostParams find params in the host cluster
	// (config.BuildOptions); nil: their config params only. The idempotency check runs with
	// the config's params only (policyreg.ConfigParamsOnly): a host param is not known at
	// start.
	HostParams policyreg.HostParams
}

// BuildRegistry loads the config (file, env, else the default or, with c.NoDefaultConfig,
// none) and returns a registry, with automatic
// undo on, holding its hooks followed by those of Register, after checking that every chain is
// idempotent on sample objects (realistic Pods, Services, Secrets and Deployments, a minimal
// object of any other kind, and c.Samples). Config errors and a chain that is not idempotent
// wrap ErrConfig.
func BuildRegistry(ctx context.Context, c RegistryConfig) (*engine.Registry, error) {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if len(c.EnvVars) == 0 {
		c.EnvVars = []string{config.EnvVar}
	}
	cfg, source, err := config.Load(c.ConfigFile, c.Getenv, c.EnvVars...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	sourceName := source.String()
	if source.Kind == config.SourceDefault && c.NoDefaultConfig {
		cfg, sourceName = &config.Config{}, "none (Go hooks only)"
	}
	reg, err := RegistryOf(ctx, cfg, c)
	if err != nil {
		return nil, err
	}
	c.Log.Info("hooks loaded", "config", sourceName, "chains", len(reg.Keys()))
	return reg, nil
}

// RegistryOf is the one load path of a parsed config, for every command that runs hooks
// (serve, the vcluster plugins, mutate, replay, and `synchook test`, which must refuse what
// would not start): a registry with automatic undo on, holding cfg's hooks followed by those
// of c.Register, after checking that every chain is idempotent on sample objects (unless
// c.SkipIdempotencyCheck). c's config source fields (ConfigFile, EnvVars, Getenv,
// NoDefaultConfig) and Log are not read. Errors wrap ErrConfig.
func RegistryOf(ctx context.Context, cfg *config.Config, c RegistryConfig) (*engine.Registry, error) {
	// Automatic undo is on: what the hooks add on the way down comes off on the way up, so the
	// syncer never sees it as a difference (hooks opt out with undo: false / Undo() false).
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Provenance: c.Provenance || cfg.Provenance, Version: c.Version, Keys: c.Keys})
	if err := cfg.BuildWith(reg, config.BuildOptions{HostParams: c.HostParams}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Register != nil {
		if err := c.Register(reg); err != nil {
			return nil, fmt.Errorf("%w: register Go hooks: %w", ErrConfig, err)
		}
	}
	if c.SkipIdempotencyCheck {
		c.Log.Info("WARNING: idempotency check skipped: a hook that changes its own result again makes the syncer write on every pass")
	} else if err := reg.CheckIdempotent(policyreg.ConfigParamsOnly(ctx), sampleObjects(c.Samples)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return reg, nil
}

// sampleObjects returns the objects to check a GVK's chains on: the realistic fixtures for Pods,
// Services, Secrets and Deployments, a minimal object of any other kind, and the extra objects
// of that GVK.
func sampleObjects(extra [][]byte) func(schema.GroupVersionKind) [][]byte {
	return func(gvk schema.GroupVersionKind) [][]byte {
		var out [][]byte
		switch gvk {
		case corev1.SchemeGroupVersion.WithKind("Pod"):
			out = append(out, fixtures.JSON(fixtures.Pod("default", "sample")))
		case corev1.SchemeGroupVersion.WithKind("Service"):
			out = append(out, fixtures.JSON(fixtures.Service("default", "sample")))
		case corev1.SchemeGroupVersion.WithKind("Secret"):
			out = append(out, fixtures.JSON(fixtures.Secret("default", "sample", "sample-value")))
		case appsv1.SchemeGroupVersion.WithKind("Deployment"):
			out = append(out, fixtures.JSON(fixtures.Deployment("default", "sample")))
		default:
			apiVersion, kind := gvk.ToAPIVersionAndKind()
			out = append(out, fixtures.JSON(map[string]any{
				"apiVersion": apiVersion, "kind": kind,
				"metadata": map[string]any{"name": "sample", "namespace": "default", "labels": map[string]string{"app": "sample"}},
			}))
		}
		for _, x := range extra {
			if got, err := engine.ObjectGVK(x); err == nil && got == gvk {
				out = append(out, x)
			}
		}
		return out
	}
}

// Serve runs the sidecar until ctx ends: it takes its undo key (serveKeys), builds the
// registry, makes sure a serving cert exists (generating and renewing it unless
// user-supplied), serves HTTPS and, when Bridge.Address is set, the vcluster plugin v1 bridge
// (registering with vcluster). When ctx ends it drains in-flight requests and returns nil.
// Config errors wrap ErrConfig. Serve never runs without an undo key.
func Serve(ctx context.Context, opts Options) error {
	opts.setDefaults()
	log := opts.Log
	kinds := make([]undo.Kind, 0, len(opts.UndoKinds))
	for _, text := range opts.UndoKinds {
		k, err := undo.ParseKind(text)
		if err != nil {
			return fmt.Errorf("%w: --undo-kinds: %w", ErrConfig, err)
		}
		kinds = append(kinds, k)
	}
	// keyCtx ends when Serve returns: the key Secret's manager and the sealed-kinds logger
	// stop, and Serve waits for both (no write or line after it returns).
	keyCtx, stopKeys := context.WithCancel(ctx)
	keys, secret, err := serveKeys(keyCtx, &opts)
	if err != nil {
		stopKeys()
		return err
	}
	keys.Remember(kinds...)
	logDone := make(chan struct{})
	defer func() {
		stopKeys()
		<-logDone
		if secret != nil {
			<-secret.Done()
		}
	}()
	go func() {
		defer close(logDone)
		logSealedKinds(keyCtx, keys, secret != nil, log.WithName("undo"))
	}()
	params := serveParams(&opts)
	defer params.Close()
	reg, err := BuildRegistry(ctx, RegistryConfig{
		ConfigFile: opts.ConfigFile, NoDefaultConfig: opts.NoDefaultConfig, Getenv: opts.Getenv, Register: opts.Register,
		SkipIdempotencyCheck: opts.SkipIdempotencyCheck, Log: log,
		Provenance: opts.Provenance, Version: opts.Version, Keys: keys, HostParams: params,
	})
	if err != nil {
		return err
	}
	// The kinds of --undo-kinds and, with a key Secret, those it lists.
	reg.CoverUndoReads(keys.SealedKinds())
	rec := metrics.New(reg, log.WithName("hooks"))
	ropts := engine.RunnerOptions{MaxConcurrent: opts.MaxConcurrentHooks, HookTimeout: opts.HookTimeout, Observer: rec, Log: log.WithName("hook")}
	cw, err := startCapture(&opts, reg, &ropts)
	if err != nil {
		return err
	}
	if cw != nil {
		defer cw.Close() // after every server has stopped: writes the samples still waiting
	}
	runner := engine.NewRunner(reg, ropts)
	opts.Bridge.Metrics = rec
	var plugin *bridge.Bridge
	if opts.Bridge.Address != "" {
		if plugin, err = newBridge(runner, opts.Bridge, opts.Webhook, log); err != nil {
			return err
		}
	}

	// Everything that can fail on bad options happens before any listener or loop starts.
	wopts := opts.Webhook
	wopts.Log = log.WithName("webhook")
	wopts.Metrics = rec
	if wopts.DisableTCP && wopts.SocketPath == "" {
		return fmt.Errorf("%w: the HTTPS listener is off (--bind-address=0) and there is no --socket-path", ErrConfig)
	}
	renew, err := servingCert(&opts, &wopts) // the generated cert's renewal loop, when there is one
	if err != nil {
		return err
	}
	// Namespaces for hooks that read them, from the cluster synchook serves (its client: in a
	// pod, the service account's, which needs list and watch on namespaces): started on the
	// first lookup, so a config without such hooks never watches.
	nsCache := namespaces.NewCache()
	defer nsCache.Close()
	if rc, err := opts.RESTConfig(); err == nil {
		nsCache.Configure(rc)
	} else {
		log.V(1).Info("no cluster client: hooks that read namespaces fail their requests", "reason", err.Error())
	}
	wopts.Namespaces = nsCache
	srv, err := webhook.NewServer(runner, wopts)
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	if opts.MetricsBindAddress != "0" {
		g.Go(func() error { return metrics.Serve(ctx, opts.MetricsBindAddress, log.WithName("metrics")) })
	}
	if renew != nil {
		g.Go(func() error { return renew(ctx) })
	}
	if !wopts.DisableTCP {
		g.Go(func() error { watchCertExpiry(ctx, wopts.CertFile, log); return nil })
	}
	if plugin != nil {
		g.Go(func() error { return plugin.Run(ctx) })
	}
	g.Go(func() error { return srv.Start(ctx) })
	log.Info("serving", "address", wopts.BindAddress, "probes", wopts.ProbeBindAddress)
	return g.Wait()
}

// serveParams returns serve's params from the host cluster (package paramsource): the
// cluster of opts.RESTConfig, never from the namespace serve runs in (UndoKeyNamespace, else
// the pod's: as a vcluster plugin v1 sidecar, the vcluster's host namespace, where synced
// tenant objects land). Without a client config policies that ask for host params fail their
// requests under their failurePolicy (paramsource.ErrNoHost). Watches start on a policy's
// first request.
func serveParams(opts *Options) *paramsource.Host {
	log := opts.Log.WithName("params")
	params := paramsource.New(paramsource.Options{Log: log})
	rc, err := opts.RESTConfig()
	if err != nil {
		log.V(1).Info("no cluster client: policies with hostParams fail their requests", "reason", err.Error())
		return params
	}
	own, _, _ := keyNamespace(opts)
	if err := params.Configure(rc, own); err != nil {
		log.Error(err, "no params from the host cluster: policies with hostParams fail their requests")
	}
	return params
}

// servingCert sets the serving certificate and key of wopts: the user-supplied files of opts
// (TLSCertFile and TLSKeyFile, which go together), else those of opts.CertDir, generated when
// the dir has none. It returns the generated certificate's renewal loop (nil when the
// certificate is user-supplied).
func servingCert(opts *Options, wopts *webhook.Options) (renew func(context.Context) error, err error) {
	log := opts.Log
	if opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		if opts.TLSCertFile == "" || opts.TLSKeyFile == "" {
			return nil, fmt.Errorf("%w: --tls-cert-file and --tls-key-file go together", ErrConfig)
		}
		wopts.CertFile, wopts.KeyFile = opts.TLSCertFile, opts.TLSKeyFile
		log.Info("using user-supplied serving certificate", "cert", opts.TLSCertFile)
		return nil, nil
	}
	ca, err := certs.New(certs.Options{Dir: opts.CertDir, DNSNames: opts.CertDNSNames, Log: log.WithName("certs")})
	if err != nil {
		return nil, err
	}
	if err := ca.Ensure(); err != nil {
		return nil, err
	}
	wopts.CertFile, wopts.KeyFile = ca.CertFile(), ca.KeyFile()
	if ca.UserSupplied() {
		log.Info("using user-supplied serving certificate from the cert dir", "dir", opts.CertDir)
		return nil, nil
	}
	log.Info("serving certificate ready", "dir", opts.CertDir, "ca", ca.CAFile())
	return ca.Run, nil
}

// startCapture starts the capture writer when opts.CaptureDir is set and hooks it into ro; it
// returns nil when capture is off. The caller closes the writer.
func startCapture(opts *Options, reg *engine.Registry, ro *engine.RunnerOptions) (*capture.Writer, error) {
	if opts.CaptureDir == "" {
		return nil, nil
	}
	cw, err := capture.New(capture.Options{
		Dir: opts.CaptureDir, Sample: opts.CaptureSample, MaxBytes: opts.CaptureMaxBytes,
		Version: opts.Version, Registry: reg, Log: opts.Log.WithName("capture"),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	ro.Capture = cw.Capture
	go cw.Run(context.Background())
	sample := cmp.Or(opts.CaptureSample, capture.DefaultSample)
	opts.Log.Info("capturing a sample of the requests", "dir", opts.CaptureDir, "sample", sample)
	return cw, nil
}

// captureFromEnv fills the capture options from the environment where they are unset.
func captureFromEnv(opts *Options) error {
	opts.CaptureDir = cmp.Or(opts.CaptureDir, opts.Getenv(CaptureDirEnvVar))
	if v := opts.Getenv(CaptureSampleEnvVar); v != "" && opts.CaptureSample == 0 {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %w", ErrConfig, CaptureSampleEnvVar, v, err)
		}
		opts.CaptureSample = f
	}
	if v := opts.Getenv(CaptureMaxBytesEnvVar); v != "" && opts.CaptureMaxBytes == 0 {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %w", ErrConfig, CaptureMaxBytesEnvVar, v, err)
		}
		opts.CaptureMaxBytes = n
	}
	return nil
}

// newBridge returns the vcluster plugin bridge for runner, with the request limits of the
// webhook where bopts leaves them unset.
func newBridge(runner *engine.Runner, bopts bridge.Options, wopts webhook.Options, log logr.Logger) (*bridge.Bridge, error) {
	bopts.RequestTimeout = cmp.Or(max(bopts.RequestTimeout, 0), wopts.RequestTimeout)
	bopts.MaxMessageBytes = cmp.Or(max(bopts.MaxMessageBytes, 0), int(wopts.MaxRequestBytes))
	bopts.Log = log.WithName("bridge")
	b, err := bridge.New(runner, bopts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return b, nil
}

// MutateResult is the outcome of a dry run.
type MutateResult struct {
	// Patch is the JSON Patch (nil when nothing changed) and Object the resulting object JSON.
	Patch, Object []byte
	// Hooks is the number of hooks that ran.
	Hooks int
}

// Mutate runs the chain of hookType on one object offline, exactly as the server would, and
// returns the patch and the resulting object. objectJSON must carry apiVersion and kind.
func Mutate(ctx context.Context, reg *engine.Registry, hookType hooks.HookType, objectJSON []byte, timeout time.Duration) (*MutateResult, error) {
	gvk, err := engine.ObjectGVK(objectJSON)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := reg.Mutate(ctx, gvk, hookType, objectJSON)
	if err != nil {
		return nil, err
	}
	object, err := res.Object()
	if err != nil {
		return nil, err
	}
	return &MutateResult{Patch: res.Patch, Object: object, Hooks: res.Hooks}, nil
}

// watchCertExpiry keeps the certificate expiry metric at the NotAfter of certFile, read now and
// every minute until ctx ends.
func watchCertExpiry(ctx context.Context, certFile string, log logr.Logger) {
	for {
		if notAfter, err := certs.NotAfter(certFile); err == nil {
			metrics.SetCertificateExpiry(notAfter)
		} else {
			log.V(1).Info("cannot read the serving certificate's expiry", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
	}
}

// logSealedKinds logs, once per kind, that an undo was sealed on an object of it: the kinds to
// keep in --undo-kinds when its last hook is removed, until `synchook cleanup` has run (a
// key Secret, stored says, remembers them itself).
func logSealedKinds(ctx context.Context, keys *undo.Keeper, stored bool, log logr.Logger) {
	msg := "sealed an undo on a new kind: keep it in --undo-kinds after removing its hooks, until synchook cleanup has run"
	if stored {
		msg = "sealed an undo on a new kind: the undo key Secret remembers it, so its reads stay served after its hooks are removed, until synchook cleanup has run"
	}
	seen := map[undo.Kind]bool{}
	for _, k := range keys.SealedKinds() {
		seen[k] = true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-keys.Changed():
		}
		for _, k := range keys.SealedKinds() {
			if !seen[k] {
				seen[k] = true
				log.Info(msg, "kind", k.String())
			}
		}
	}
}

// UndoKeyFileEnvVar names the undo key ring file in plugin v2 mode (Options.UndoKeyFile).
const UndoKeyFileEnvVar = "SYNCHOOK_UNDO_KEY_FILE"

// LoadKeys returns a Keeper holding the key ring in the file at path (package undo's ring
// text), or an empty Keeper when path is empty. Errors name the file, never a key.
func LoadKeys(path string) (*undo.Keeper, error) {
	if path == "" {
		return undo.NewKeeper(nil), nil
	}
	ring, err := undokey.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return undo.NewKeeper(ring), nil
}

// ServePluginV2 runs synchook as a vcluster plugin v2 (package bridgev2): it builds the registry
// from the YAML in PLUGIN_CONFIG (the values' plugins.<name>.config; empty, "null" or "{}" mean
// SYNCHOOK_CONFIG or the built-in default, as for Serve) followed by Options.Register's hooks,
// then serves go-plugin until vcluster ends the plugin. Of opts it uses NoDefaultConfig, Getenv, Register,
// Webhook.RequestTimeout, Webhook.MaxRequestBytes, Webhook.StuckSlotsFactor,
// MaxConcurrentHooks, HookTimeout, Log, Version and the capture options, which the SYNCHOOK_CAPTURE_* env vars fill when unset.
// It returns an error, before any handshake, when the config is invalid (wrapping ErrConfig):
// vcluster's Start then fails; the binary logs the reason as hclog JSON, the only stderr form vcluster shows.
func ServePluginV2(opts Options, serve bridgev2.ServeOptions) error {
	opts.setDefaults()
	opts.UndoKeyFile = cmp.Or(opts.UndoKeyFile, opts.Getenv(UndoKeyFileEnvVar))
	keys, err := LoadKeys(opts.UndoKeyFile) // none: the key Secret is read at Initialize
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if keys.Ring() != nil {
		opts.Log.Info("undo key from a file", "file", opts.UndoKeyFile, "keys", keys.Ring().IDs())
	}
	// Params from the host cluster: Initialize gives its kubeconfig and the vcluster's host
	// namespace (never read).
	params := paramsource.New(paramsource.Options{Log: opts.Log.WithName("params")})
	defer params.Close()
	reg, err := BuildRegistry(context.Background(), RegistryConfig{
		EnvVars: []string{bridgev2.ConfigEnvVar, config.EnvVar}, NoDefaultConfig: opts.NoDefaultConfig, Getenv: opts.Getenv, Register: opts.Register,
		SkipIdempotencyCheck: opts.SkipIdempotencyCheck || opts.Getenv(SkipIdempotencyCheckEnvVar) == "true", Log: opts.Log,
		Provenance: opts.Provenance || opts.Getenv(ProvenanceEnvVar) == "true", Version: opts.Version, Keys: keys, HostParams: params,
	})
	if err != nil {
		return err
	}
	if err := captureFromEnv(&opts); err != nil {
		return err
	}
	// Metrics are recorded as for serve: the Observer also detects loops and counts dropped
	// undos. A listener only where SYNCHOOK_METRICS_BIND_ADDRESS asks for one: the plugin runs
	// in the syncer's container, whose ports are vcluster's.
	rec := metrics.New(reg, opts.Log.WithName("hooks"))
	ropts := engine.RunnerOptions{MaxConcurrent: opts.MaxConcurrentHooks, HookTimeout: opts.HookTimeout, Observer: rec, Log: opts.Log.WithName("hook")}
	defer serveFromEnv(&opts, MetricsBindAddressEnvVar, "metrics", metrics.Serve)()
	defer serveFromEnv(&opts, PprofBindAddressEnvVar, "pprof", servePprof)()
	cw, err := startCapture(&opts, reg, &ropts)
	if err != nil {
		return err
	}
	if cw != nil {
		defer cw.Close()
	}
	runner := engine.NewRunner(reg, ropts)
	maxBytes := cmp.Or(max(int(opts.Webhook.MaxRequestBytes), 0), webhook.DefaultMaxRequestBytes) // as for serve's --max-request-bytes
	nsCache := namespaces.NewCache()                                                              // watches the virtual cluster's Namespaces once a hook asks
	defer nsCache.Close()
	srv, err := bridgev2.New(runner, bridgev2.Options{
		RequestTimeout:   opts.Webhook.RequestTimeout,
		MaxMessageBytes:  maxBytes,
		StuckSlotsFactor: opts.Webhook.StuckSlotsFactor,
		Metrics:          rec,
		Log:              opts.Log.WithName("pluginv2"),
		// No key file: the key Secret in the host namespace, read at Initialize.
		Keys:          keys,
		OnKeyFallback: rec.ObserveUndoKeyFallback,
		Namespaces:    nsCache,
		Host:          params.Configure,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	opts.Log.Info("serving vcluster plugin v2", "clientHooks", srv.PluginConfig())
	bridgev2.Serve(srv, serve)
	return nil
}
