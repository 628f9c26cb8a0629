package plugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undokey"
	"github.com/synchook/synchook/webhook"
)

// envOr returns the environment variable key read with getenv, or def when it is empty.
func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// serveFlags returns serve's flags; the defaults of --plugin-address and --plugin-name come
// from the environment, read with getenv. --kubeconfig and --context choose the cluster of the
// undo key Secret (opts.RESTConfig); without them serve finds it as sidecar.ClusterConfig does.
func serveFlags(getenv func(string) string) (*pflag.FlagSet, *sidecar.Options, *zap.Options) {
	opts := &sidecar.Options{Getenv: getenv}
	zopts := &zap.Options{}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.StringVar(&opts.ConfigFile, "config", "", "path of the YAML hook config; empty: the SYNCHOOK_CONFIG env var, else the built-in default (label synchook.io/hooked=true on pods for CreatePhysical, UpdatePhysical), or none in a program with Go hooks")
	fs.StringVar(&opts.Webhook.BindAddress, "bind-address", webhook.DefaultBindAddress, "host:port of the HTTPS listener; \"0\" disables it (then --socket-path is needed)")
	fs.StringVar(&opts.Webhook.ProbeBindAddress, "health-probe-bind-address", webhook.DefaultProbeBindAddress, "host:port of the plain-HTTP /healthz and /readyz listener for kubelet probes; \"0\" disables it")
	fs.StringVar(&opts.CertDir, "cert-dir", sidecar.DefaultCertDir, "directory of the generated CA and serving cert (tls.crt, tls.key, ca.crt); tls.crt+tls.key without ca.key there are used as they are")
	fs.StringArrayVar(&opts.CertDNSNames, "cert-dns-name", nil, "extra DNS name (or IP) for the generated serving cert, on top of localhost, 127.0.0.1, ::1; repeatable")
	fs.StringVar(&opts.TLSCertFile, "tls-cert-file", "", "user-supplied serving cert (PEM), used as it is; needs --tls-key-file")
	fs.StringVar(&opts.TLSKeyFile, "tls-key-file", "", "user-supplied serving key (PEM)")
	fs.Int64Var(&opts.Webhook.MaxRequestBytes, "max-request-bytes", webhook.DefaultMaxRequestBytes, "largest request in bytes, on every transport: an AdmissionReview body (larger: 413) and a vcluster plugin Mutate message (larger: ResourceExhausted)")
	fs.DurationVar(&opts.Webhook.RequestTimeout, "request-timeout", webhook.DefaultRequestTimeout, "time one request may spend in its hook chain")
	fs.StringVar(&opts.Webhook.SocketPath, "socket-path", "", "also serve plain HTTP on a unix socket at this path (mode 0600), for a syncer in the same pod sharing the directory; empty: none")
	fs.StringVar(&opts.Webhook.ClientCAFile, "client-ca-file", "", "require HTTPS clients to present a certificate signed by a CA in this PEM file (for binding beyond localhost); empty: no client authentication")
	fs.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", sidecar.DefaultMetricsBindAddress, "host:port of the plain-HTTP Prometheus /metrics listener; \"0\" disables it")
	fs.IntVar(&opts.MaxConcurrentHooks, "max-concurrent-hooks", sidecar.DefaultMaxConcurrentHooks, "hook chains running at once (stuck ones included); past it requests get 429 / ResourceExhausted")
	fs.BoolVar(&opts.Provenance, "provenance", false, "annotate every object a hook chain changed with synchook.io/mutated-by: hook@version#sha per hook that changed it (taken off again on the way back); config provenance: true does the same")
	fs.BoolVar(&opts.SkipIdempotencyCheck, "skip-idempotency-check", false, "start even when a hook chain changes its own result again (checked at start on built-in sample objects: such a hook makes the syncer write on every pass); logs a warning")
	fs.DurationVar(&opts.HookTimeout, "hook-timeout", 0, "each hook call's own deadline within --request-timeout; 0: only the request deadline")
	fs.IntVar(&opts.Webhook.StuckSlotsFactor, "stuck-slots-factor", metrics.DefaultStuckSlotsFactor, "N: /healthz and /readyz fail (check hook-slots) while every --max-concurrent-hooks slot has been held longer than N × --request-timeout by hooks that ignore their context, so kubelet restarts synchook; logged once; < 0: off")
	fs.StringVar(&opts.Bridge.Address, "plugin-address", getenv("VCLUSTER_PLUGIN_ADDRESS"), "host:port of the vcluster plugin v1 gRPC bridge (registered with vcluster as an IP, localhost = 127.0.0.1); default: the VCLUSTER_PLUGIN_ADDRESS env var the vcluster chart sets; empty disables the bridge")
	fs.StringVar(&opts.Bridge.Name, "plugin-name", envOr(getenv, "VCLUSTER_PLUGIN_NAME", bridge.DefaultName), "plugin name registered with vcluster (its key under the chart's plugin: values); default: the VCLUSTER_PLUGIN_NAME env var, else synchook")
	fs.StringVar(&opts.Bridge.VClusterAddress, "vcluster-address", bridge.DefaultVClusterAddress, "host:port of vcluster's plugin server, where the bridge registers")
	fs.StringVar(&opts.UndoKeyFile, "undo-key-file", "", "undo key ring file (a mounted Secret's item; synchook undo-key prints a new one; refused when group or others may write it) that seals synchook.io/undo so that no tenant can forge it and no Secret value is stored in clear; empty: in a cluster (-n/--namespace, else the pod's namespace) the key Secret --undo-key-secret there, kept by serve (needs RBAC get, create, update on secrets there; serve does not start without it), else the file undo.keys in --cert-dir, created on the first start")
	cluster := &clusterFlags{}
	cluster.bind(fs, &opts.UndoKeyNamespace, "namespace of the undo key Secret that serve reads or creates without --undo-key-file; empty: the pod's namespace ("+sidecar.DefaultServiceAccountNamespaceFile+"), none outside a pod (then the key file in --cert-dir; the kubeconfig context's namespace is not used)")
	fs.Lookup("kubeconfig").Usage = "kubeconfig of the cluster serve keeps its undo key Secret in and reads namespaces from (for hooks that read them); empty: the KUBECONFIG env var, else the in-cluster config of a pod, else ~/.kube/config"
	fs.Lookup("context").Usage = "kubeconfig context of that cluster; empty: the kubeconfig's current-context"
	opts.RESTConfig = func() (*rest.Config, error) {
		if cluster.kubeconfig == "" && cluster.overrides.CurrentContext == "" {
			return sidecar.ClusterConfig(getenv)
		}
		return cluster.restConfig(getenv)
	}
	deprecatedAlias(fs, "undo-key-namespace", "namespace")
	fs.StringVar(&opts.UndoKeySecretName, "undo-key-secret", undokey.DefaultSecretName, "name of the undo key Secret in -n/--namespace")
	deprecatedAlias(fs, "undo-key-secret-name", "undo-key-secret")
	fs.StringArrayVar(&opts.UndoKinds, "undo-kinds", nil, "a kind whose undo reads stay served after its last hook was removed, as \"<group/version>/<Kind> physical|virtual\" (\"v1/Pod physical\"; repeat the flag for more), until synchook cleanup has run; serve logs each kind it seals an undo on")
	fs.StringVar(&opts.CaptureDir, "capture", "", "write a sample of the requests to this directory (created 0700; refused when it is a symbolic link, writable by group or others, or another user's), one JSON file each (0600, Secret values replaced by an HMAC-SHA256 under a key random per process), for synchook replay; empty: no capture")
	fs.Float64Var(&opts.CaptureSample, "capture-sample", capture.DefaultSample, "fraction of the requests --capture writes, in (0, 1]")
	fs.Int64Var(&opts.CaptureMaxBytes, "capture-max-bytes", capture.DefaultMaxBytes, "bound of the total size of the --capture files; the oldest are deleted first")
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	zopts.BindFlags(zfs)
	fs.AddGoFlagSet(zfs)
	return fs, opts, zopts
}

// newServeCommand is `synchook serve`.
func (p *Plugin) newServeCommand(stderr io.Writer) *cobra.Command {
	fs, opts, zopts := serveFlags(p.getenv)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the sidecar: the admission webhook and the vcluster plugin v1 bridge",
		Long: `Run synchook as a sidecar: an HTTPS mutating admission webhook (/mutate/<HookType>) that
answers with JSON Patches, plain-HTTP /healthz, /readyz and /metrics, optionally a unix socket
and the vcluster plugin v1 gRPC bridge. It generates its own CA and serving certificate in
--cert-dir unless given one, and seals every undo it writes with the undo key: --undo-key-file,
else in a cluster the key Secret --undo-key-secret in -n/--namespace (default: the pod's
namespace), else the file undo.keys in --cert-dir. --kubeconfig and --context choose the
cluster of that Secret and of the namespaces hooks read, as kubectl does (default: KUBECONFIG,
else the in-cluster config, else ~/.kube/config). It stops on SIGTERM or SIGINT.

Exit codes: 0 stopped; 1 failed; 2 bad flags or an invalid configuration (nothing started).`,
		Example: `  # Serve the built-in default config on 127.0.0.1:9443 with generated certificates
  synchook serve

  # Serve a hook config, certificates on a shared volume, the key from a mounted Secret
  synchook serve --config /etc/synchook/hooks.yaml --cert-dir /var/run/synchook/certs \
    --undo-key-file /var/run/synchook-undo-key/keys`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			return exitCode(p.serve(opts, zopts, stderr))
		},
	}
	cmd.Flags().AddFlagSet(fs)
	return cmd
}

// serve runs the sidecar with opts until SIGTERM or SIGINT and returns the exit code.
func (p *Plugin) serve(opts *sidecar.Options, zopts *zap.Options, stderr io.Writer) int {
	if opts.Webhook.BindAddress == "0" {
		opts.Webhook.DisableTCP = true
	}
	log := newLogger(zopts, stderr)
	ctrl.SetLogger(log)
	opts.Log = log
	opts.Register = p.registerHooks
	opts.NoDefaultConfig = p.hasHooks()
	opts.Version = Version()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := sidecar.Serve(ctx, *opts); err != nil {
		log.Error(err, "synchook stopped")
		fmt.Fprintf(stderr, "synchook: %v\n", err)
		if errors.Is(err, sidecar.ErrConfig) {
			return exitUsage
		}
		return exitFailed
	}
	log.Info("synchook stopped")
	return exitOK
}
