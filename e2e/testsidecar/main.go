// Command testsidecar is the synchook sidecar with the Go hooks that the end-to-end sync tests
// need on top of config hooks. It serves exactly as "synchook serve" does, through
// sidecar.Serve, with a smaller set of flags:
//
//	testsidecar --bind-address 127.0.0.1:PORT --cert-dir DIR --config FILE [--metrics-bind-address 127.0.0.1:PORT] [--zap-log-level L]
//
// Its Go hook HostMetricsPort adds the port "host-metrics" (9100) to services on
// CreatePhysical and UpdatePhysical, with no Get hook: the automatic undo removes it again on
// GetPhysical, so that a syncer that compares what it reads with what it wants never sees it.
// A service labelled e2e.synchook.io/read-hook=off gets the port from ControlPortHook, which
// puts it back on reads after the automatic undo took it off (the control case: the syncer
// sees the port, as without undo). Undo is per chain, so the control cannot simply opt out: it
// shares the Service chains with HostMetricsPortHook.
//
// It logs in JSON like synchook serve, but without sampling, so every request has its line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/webhook"
)

// The port HostMetricsPort adds, and the label that turns its read hook off.
const (
	HostMetricsPortName = "host-metrics"
	HostMetricsPort     = 9100
	ReadHookLabel       = "e2e.synchook.io/read-hook"
)

// HostMetricsPortHook adds the host-metrics port on the way down. It has no Get hook: the
// automatic undo takes the port off again when the syncer reads the service back. Services
// labelled ReadHookLabel=off get it from ControlPortHook instead.
type HostMetricsPortHook struct{}

// Name implements hooks.ClientHook.
func (HostMetricsPortHook) Name() string { return "host-metrics-port" }

// Resource implements hooks.ClientHook.
func (HostMetricsPortHook) Resource() client.Object { return &corev1.Service{} }

// MutateCreatePhysical adds the port.
func (HostMetricsPortHook) MutateCreatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return addPort(obj.(*corev1.Service), false), nil
}

// MutateUpdatePhysical adds the port back when the syncer's update lacks it.
func (HostMetricsPortHook) MutateUpdatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return addPort(obj.(*corev1.Service), false), nil
}

// ControlPortHook adds the same port to services labelled ReadHookLabel=off and adds it again
// on GetPhysical, after the automatic undo: the control case, whose port the syncer sees on
// reads.
type ControlPortHook struct{}

// Name implements hooks.ClientHook.
func (ControlPortHook) Name() string { return "control-port" }

// Resource implements hooks.ClientHook.
func (ControlPortHook) Resource() client.Object { return &corev1.Service{} }

// MutateGetPhysical shows the port to the syncer again.
func (ControlPortHook) MutateGetPhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return addPort(obj.(*corev1.Service), true), nil
}

// MutateCreatePhysical adds the port.
func (ControlPortHook) MutateCreatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return addPort(obj.(*corev1.Service), true), nil
}

// MutateUpdatePhysical adds the port back when the syncer's update lacks it.
func (ControlPortHook) MutateUpdatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return addPort(obj.(*corev1.Service), true), nil
}

// addPort adds the port to svc when svc is (control) or is not (!control) labelled
// ReadHookLabel=off.
func addPort(svc *corev1.Service, control bool) *corev1.Service {
	if (svc.Labels[ReadHookLabel] == "off") != control {
		return svc
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == HostMetricsPortName }) {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: HostMetricsPortName, Port: HostMetricsPort, TargetPort: intstr.FromInt32(HostMetricsPort), Protocol: corev1.ProtocolTCP,
		})
	}
	return svc
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	register := func(reg *engine.Registry) error {
		return errors.Join(reg.Register(HostMetricsPortHook{}), reg.Register(ControlPortHook{}))
	}
	opts := sidecar.Options{Register: register}
	opts.Webhook.ProbeBindAddress = "0"
	fs := flag.NewFlagSet("testsidecar", flag.ContinueOnError)
	fs.StringVar(&opts.Webhook.BindAddress, "bind-address", webhook.DefaultBindAddress, "host:port of the HTTPS listener")
	fs.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", "0", "host:port of the /metrics listener; \"0\" (the default) disables it")
	fs.StringVar(&opts.CertDir, "cert-dir", "", "directory of the generated CA and serving cert (required)")
	fs.StringVar(&opts.ConfigFile, "config", "", "path of the YAML hook config (required)")
	zopts := &zap.Options{}
	zopts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if opts.CertDir == "" || opts.ConfigFile == "" {
		fmt.Fprintln(os.Stderr, "testsidecar: --cert-dir and --config are required")
		return 2
	}
	// Development mode turns off zap's sampling (past 100 identical messages a second only
	// every 100th is written), so that tests can count the per-request lines; JSON as in
	// production.
	log := zap.New(zap.UseFlagOptions(zopts), zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.JSONEncoder())
	ctrl.SetLogger(log)
	opts.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := sidecar.Serve(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "testsidecar: %v\n", err)
		if errors.Is(err, sidecar.ErrConfig) {
			return 2
		}
		return 1
	}
	return 0
}
