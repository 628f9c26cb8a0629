package sidecar

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/webhook"
)

// RegisterFunc adds compiled Go hooks to a registry after the config's hooks. It may be nil.
type RegisterFunc func(*hooks.Registry) error

// Options configures Serve. Zero fields take the defaults named on each.
type Options struct {
	// ConfigFile is the path of the YAML hook config. Empty means the SYNCHOOK_CONFIG env var,
	// or config.Default() when that is empty too.
	ConfigFile string
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
	// Log is the root logger. Default logr.Discard().
	Log logr.Logger
}

// DefaultCertDir is the default Options.CertDir.
const DefaultCertDir = "/tmp/synchook/certs"

// ErrConfig is wrapped by errors caused by bad configuration (exit code 2 in main).
var ErrConfig = errors.New("invalid configuration")

func (o *Options) setDefaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.CertDir == "" {
		o.CertDir = DefaultCertDir
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
}

// BuildRegistry loads the config (file, env or default) and returns a registry with its hooks
// followed by those of register. Config errors wrap ErrConfig.
func BuildRegistry(configFile string, getenv func(string) string, register RegisterFunc, log logr.Logger) (*hooks.Registry, error) {
	cfg, source, err := config.Load(configFile, getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	reg := hooks.NewRegistry(nil)
	if err := cfg.Build(reg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if register != nil {
		if err := register(reg); err != nil {
			return nil, fmt.Errorf("register Go hooks: %w", err)
		}
	}
	log.Info("hooks loaded", "config", source, "chains", len(reg.Keys()))
	return reg, nil
}

// Serve runs the sidecar until ctx ends: it builds the registry, makes sure a serving cert
// exists (generating and renewing it unless user-supplied), and serves HTTPS. When ctx ends it
// drains in-flight requests and returns nil. Config errors wrap ErrConfig.
func Serve(ctx context.Context, opts Options) error {
	opts.setDefaults()
	log := opts.Log
	reg, err := BuildRegistry(opts.ConfigFile, opts.Getenv, opts.Register, log)
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	wopts := opts.Webhook
	wopts.Log = log.WithName("webhook")
	if opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		if opts.TLSCertFile == "" || opts.TLSKeyFile == "" {
			return fmt.Errorf("%w: --tls-cert-file and --tls-key-file go together", ErrConfig)
		}
		wopts.CertFile, wopts.KeyFile = opts.TLSCertFile, opts.TLSKeyFile
		log.Info("using user-supplied serving certificate", "cert", opts.TLSCertFile)
	} else {
		ca, err := certs.New(certs.Options{Dir: opts.CertDir, DNSNames: opts.CertDNSNames, Log: log.WithName("certs")})
		if err != nil {
			return err
		}
		if err := ca.Ensure(); err != nil {
			return err
		}
		wopts.CertFile, wopts.KeyFile = ca.CertFile(), ca.KeyFile()
		if ca.UserSupplied() {
			log.Info("using user-supplied serving certificate from the cert dir", "dir", opts.CertDir)
		} else {
			log.Info("serving certificate ready", "dir", opts.CertDir, "ca", ca.CAFile())
			g.Go(func() error { return ca.Run(ctx) })
		}
	}

	srv, err := webhook.NewServer(reg, wopts)
	if err != nil {
		return err
	}
	g.Go(func() error { return srv.Start(ctx) })
	log.Info("serving", "address", wopts.BindAddress, "probes", wopts.ProbeBindAddress)
	return g.Wait()
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
func Mutate(ctx context.Context, reg *hooks.Registry, hookType hooks.HookType, objectJSON []byte, timeout time.Duration) (*MutateResult, error) {
	gvk, err := hooks.ObjectGVK(objectJSON)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := reg.Run(ctx, gvk, hookType, objectJSON)
	if err != nil {
		return nil, err
	}
	object, err := res.Object()
	if err != nil {
		return nil, err
	}
	return &MutateResult{Patch: res.Patch, Object: object, Hooks: res.Hooks}, nil
}
