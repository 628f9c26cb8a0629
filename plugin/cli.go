package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/hooktest"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
	"github.com/synchook/synchook/webhook"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2 // bad flags or invalid configuration
)

// servePluginV2 runs synchook as the vcluster plugin v2 that vcluster started: logs go to
// stderr (stdout carries go-plugin's handshake), the config comes from PLUGIN_CONFIG.
func (p *Plugin) servePluginV2(stderr io.Writer) int {
	// vcluster's plugin manager logs only the stderr lines that go-plugin recognises as hclog
	// JSON (@level, @message, @timestamp) at its own level; others are dropped at debug.
	log := hclogJSONLogger(stderr)
	ctrl.SetLogger(log)
	setGCPercent(p.getenv)
	err := sidecar.ServePluginV2(sidecar.Options{
		Log: log, Register: p.registerHooks, NoDefaultConfig: p.hasHooks(), Getenv: p.getenv, Version: Version(),
	}, bridgev2.ServeOptions{Stderr: stderr})
	if err != nil {
		log.Error(err, "synchook cannot start as a vcluster plugin v2")
		if errors.Is(err, sidecar.ErrConfig) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}

// run is the CLI: it runs the command in args (without the program name) and returns the exit
// code.
func (p *Plugin) run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout, p.getenv)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "serve":
		return p.serve(args[1:], stderr)
	case "mutate":
		return p.mutate(args[1:], stdin, stdout, stderr)
	case "replay":
		return p.replay(args[1:], stdout, stderr)
	case "capture":
		return captureCmd(args[1:], stdout, stderr)
	case "cleanup":
		return p.cleanup(args[1:], stdout, stderr)
	case "test":
		return p.test(args[1:], stdout, stderr)
	case "undo-key":
		return undoKey(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "synchook %s\n", Version())
		return exitOK
	case "install":
		return install(args[1:], stderr)
	default:
		fmt.Fprintf(stderr, "synchook: unknown command %q (valid: %s; see synchook --help)\n", args[0], strings.Join(commands, ", "))
		return exitUsage
	}
}

// commands are the subcommands that usage lists.
var commands = []string{"serve", "mutate", "replay", "capture", "test", "cleanup", "undo-key", "install", "version", "help"}

func usage(w io.Writer, getenv func(string) string) {
	fmt.Fprint(w, `synchook runs hooks on the objects a vcluster syncer writes and reads, as a mutating
admission webhook that answers with JSON Patches.

Usage:
  synchook serve  [flags]                          run the sidecar
  synchook mutate --type HOOKTYPE -f FILE [flags]  offline dry run of each object in FILE (YAML documents): print the
                                                   JSON Patch and the result; namespaces from --namespaces FILE
  synchook replay DIR [flags]                      run the requests serve --capture DIR saved through this
                                                   build and config; show what changes (exit 1 if anything does)
  synchook capture export DIR > capture.tar        write the capture files of DIR as one tar stream (no tar in the image)
  synchook test [--update] [-o junit] [DIR|FILE...] run the test files (synchook-test.yaml) below DIR (default .):
                                                   each write as expected, and read back without a trace (docs/testing.md)
  synchook undo-key [--rotate FILE]                print a new undo key ring (or FILE's ring with a new sealing key) for --undo-key-file
  synchook cleanup --namespace NS [flags]          stop the syncer first; remove synchook's annotations and undo its changes (see cleanup --help)
  synchook install DIR                             copy this binary to DIR/plugin (vcluster plugin v2 init container)
  synchook version                                 print the version

Started by vcluster as a plugin v2 (no arguments, VCLUSTER_PLUGIN=vcluster in the environment),
it serves vcluster's go-plugin protocol with the hook config from PLUGIN_CONFIG.

Hook types: `+hooks.ValidHookTypes()+`

Flags of serve:
`)
	fs, _, _ := serveFlags(getenv)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nFlags of mutate:\n")
	mfs, _ := mutateFlags()
	mfs.SetOutput(w)
	mfs.PrintDefaults()
	fmt.Fprint(w, "\nFlags of replay:\n")
	rfs, _ := replayFlags()
	rfs.SetOutput(w)
	rfs.PrintDefaults()
}

// envOr returns the environment variable key read with getenv, or def when it is empty.
func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// serveFlags returns serve's flags; the defaults of --plugin-address and --plugin-name come
// from the environment, read with getenv.
func serveFlags(getenv func(string) string) (*flag.FlagSet, *sidecar.Options, *zap.Options) {
	opts := &sidecar.Options{Getenv: getenv}
	zopts := &zap.Options{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&opts.ConfigFile, "config", "", "path of the YAML hook config; empty: the SYNCHOOK_CONFIG env var, else the built-in default (label synchook.io/hooked=true on pods for CreatePhysical, UpdatePhysical), or none in a program with Go hooks")
	fs.StringVar(&opts.Webhook.BindAddress, "bind-address", webhook.DefaultBindAddress, "host:port of the HTTPS listener; \"0\" disables it (then --socket-path is needed)")
	fs.StringVar(&opts.Webhook.ProbeBindAddress, "health-probe-bind-address", webhook.DefaultProbeBindAddress, "host:port of the plain-HTTP /healthz and /readyz listener for kubelet probes; \"0\" disables it")
	fs.StringVar(&opts.CertDir, "cert-dir", sidecar.DefaultCertDir, "directory of the generated CA and serving cert (tls.crt, tls.key, ca.crt); tls.crt+tls.key without ca.key there are used as they are")
	fs.Var((*stringList)(&opts.CertDNSNames), "cert-dns-name", "extra DNS name (or IP) for the generated serving cert, on top of localhost, 127.0.0.1, ::1; repeatable")
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
	fs.StringVar(&opts.UndoKeyFile, "undo-key-file", "", "undo key ring file (a mounted Secret's item; synchook undo-key prints a new one; refused when group or others may write it) that seals synchook.io/undo so that no tenant can forge it and no Secret value is stored in clear; empty: in a cluster (--undo-key-namespace, else the pod's namespace) the key Secret --undo-key-secret-name there, kept by serve (needs RBAC get, create, update on secrets there; serve does not start without it), else the file undo.keys in --cert-dir, created on the first start")
	fs.StringVar(&opts.UndoKeyNamespace, "undo-key-namespace", "", "namespace of the undo key Secret that serve reads or creates without --undo-key-file; empty: the pod's namespace ("+sidecar.DefaultServiceAccountNamespaceFile+"), none outside a pod")
	fs.StringVar(&opts.UndoKeySecretName, "undo-key-secret-name", undokey.DefaultSecretName, "name of the undo key Secret in --undo-key-namespace")
	fs.Var((*stringList)(&opts.UndoKinds), "undo-kinds", "a kind whose undo reads stay served after its last hook was removed, as \"<group/version>/<Kind> physical|virtual\" (\"v1/Pod physical\"; repeat the flag for more), until synchook cleanup has run; serve logs each kind it seals an undo on")
	fs.StringVar(&opts.CaptureDir, "capture", "", "write a sample of the requests to this directory (created 0700; refused when it is a symbolic link, writable by group or others, or another user's), one JSON file each (0600, Secret values replaced by an HMAC-SHA256 under a key random per process), for synchook replay; empty: no capture")
	fs.Float64Var(&opts.CaptureSample, "capture-sample", capture.DefaultSample, "fraction of the requests --capture writes, in (0, 1]")
	fs.Int64Var(&opts.CaptureMaxBytes, "capture-max-bytes", capture.DefaultMaxBytes, "bound of the total size of the --capture files; the oldest are deleted first")
	zopts.BindFlags(fs)
	return fs, opts, zopts
}

func (p *Plugin) serve(args []string, stderr io.Writer) int {
	fs, opts, zopts := serveFlags(p.getenv)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
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

type mutateOptions struct {
	configFile, file, hookType, output string
	timeout                            time.Duration
	skipIdempotencyCheck               bool
	undoKeyFile                        string
	namespacesFile                     string
	virtualNamespaces                  bool
}

func mutateFlags() (*flag.FlagSet, *mutateOptions) {
	o := &mutateOptions{}
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.StringVar(&o.configFile, "config", "", "path of the YAML hook config; empty: the SYNCHOOK_CONFIG env var, else the built-in default, or none in a program with Go hooks")
	fs.StringVar(&o.file, "f", "", "the objects, YAML or JSON, each with apiVersion and kind, several as YAML documents (---) run in order (empty documents skipped); - reads stdin (required)")
	fs.StringVar(&o.hookType, "type", "", "the hook type to run (required): "+hooks.ValidHookTypes())
	fs.DurationVar(&o.timeout, "timeout", webhook.DefaultRequestTimeout, "time the hook chain may take")
	fs.BoolVar(&o.skipIdempotencyCheck, "skip-idempotency-check", false, "do not refuse a hook chain that changes its own result again (checked on built-in sample objects and the given one)")
	fs.StringVar(&o.output, "o", "", "output: empty prints the JSON Patch and the result for people; json or yaml prints only the resulting object (for scripts)")
	fs.StringVar(&o.undoKeyFile, "undo-key-file", "", "undo key ring file: seal the undo of a write and open the undo of a read with it, as the deployed synchook does; empty: a throwaway key made for this run (a later GetPhysical cannot open what it sealed)")
	fs.StringVar(&o.namespacesFile, "namespaces", "", "YAML or JSON file of the Namespace objects hooks look up (labels fromNamespace, a policy's namespaceObject), one a document or a v1 List (kubectl get namespaces -o yaml); they are the only namespaces there are; empty: none, and a hook that reads one fails naming it")
	fs.BoolVar(&o.virtualNamespaces, "virtual-namespaces", false, "the --namespaces are the virtual cluster's, as under vcluster: an object of a physical hook type came from the namespace its vcluster.loft.sh/object-namespace annotation names; default: its own namespace (admission mode)")
	return fs, o
}

func (p *Plugin) mutate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, o := mutateFlags()
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "synchook mutate: "+format+"\n", a...)
		return code
	}
	if o.file == "" || o.hookType == "" {
		return fail(exitUsage, "-f and --type are required")
	}
	if o.output != "" && o.output != "json" && o.output != "yaml" {
		return fail(exitUsage, "-o %q: want json or yaml (or nothing)", o.output)
	}
	hookType, err := hooks.ParseHookType(o.hookType)
	if err != nil {
		return fail(exitUsage, "--type: %v", err)
	}
	var data []byte
	if o.file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(o.file)
	}
	if err != nil {
		return fail(exitFailed, "read object: %v", err)
	}
	what := o.file
	if what == "-" {
		what = "stdin"
	}
	// Every document is checked before any runs: a bad one prints nothing.
	docs, err := readMutateDocuments(data, what)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	nsLookup, err := readMutateNamespaces(o.namespacesFile)
	if err != nil {
		return fail(exitUsage, "--namespaces: %v", err)
	}
	ctx := namespaces.WithSource(context.Background(), namespaces.Source{Lookup: nsLookup, Virtual: o.virtualNamespaces})
	samples := make([][]byte, len(docs))
	for i := range docs {
		samples[i] = docs[i].json
	}
	keys, err := offlineKeys(o.undoKeyFile)
	if err != nil {
		return fail(exitUsage, "--undo-key-file: %v", err)
	}
	if o.undoKeyFile == "" {
		fmt.Fprintln(stderr, "synchook mutate: no --undo-key-file: sealed with a throwaway key; a round trip through `synchook mutate` of a GetPhysical needs the file")
	}
	reg, err := sidecar.BuildRegistry(ctx, sidecar.RegistryConfig{
		ConfigFile: o.configFile, NoDefaultConfig: p.hasHooks(), Getenv: p.getenv, Register: p.registerHooks,
		Log: ctrl.Log, Version: Version(), SkipIdempotencyCheck: o.skipIdempotencyCheck, Samples: samples, Keys: keys,
	})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	// Every document runs before any is printed: one that fails prints nothing.
	results, err := mutateDocuments(ctx, reg, hookType, docs, o.timeout)
	if err != nil {
		return fail(exitFailed, "%v", err)
	}
	if err := writeMutateResults(stdout, o.output, hookType, docs, results); err != nil {
		return fail(exitFailed, "%v", err)
	}
	return exitOK
}

type replayOptions struct {
	undoKeyFile          string
	configFile           string
	timeout              time.Duration
	skipIdempotencyCheck bool
}

func replayFlags() (*flag.FlagSet, *replayOptions) {
	o := &replayOptions{}
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.StringVar(&o.configFile, "config", "", "path of the YAML hook config to replay with; empty: the SYNCHOOK_CONFIG env var, else the built-in default, or none in a program with Go hooks")
	fs.DurationVar(&o.timeout, "timeout", webhook.DefaultRequestTimeout, "time each request's hook chain may take")
	fs.BoolVar(&o.skipIdempotencyCheck, "skip-idempotency-check", false, "do not refuse a hook chain that changes its own result again (checked on built-in sample objects)")
	fs.StringVar(&o.undoKeyFile, "undo-key-file", "", "the undo key ring file the captured synchook used, so that sealed undos open and compare; empty: a throwaway key, sealed undos compare as \"sealed\" only and reads of objects carrying one are reported unverifiable")
	return fs, o
}

// replayResult is the outcome of one replayed request.
type replayResult int

const (
	resultEqual replayResult = iota
	resultDifferent
	resultFailed
	// resultUnverifiable: a read of an object carrying a sealed undo, replayed without the
	// capture's key (capture.Outcome.Unverifiable). Not a difference, not a failure.
	resultUnverifiable
	resultCount // the number of results
)

// resultNames are the results' names in the summary and its per-hook table.
var resultNames = [resultCount]string{"equal", "different", "failed", "unverifiable"}

// replayTally counts outcomes, by result.
type replayTally [resultCount]int

func (t *replayTally) add(r replayResult) { t[r]++ }

// offlineKeys returns a Keeper with the ring of the key file at path or, without one, a
// throwaway ring made for this run: mutate and replay seal as serve does, which never writes
// an undo without a key.
func offlineKeys(path string) (*undo.Keeper, error) {
	if path != "" {
		return sidecar.LoadKeys(path)
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		return nil, err
	}
	return undo.NewKeeper(ring), nil
}

// replayTotals are the outcomes of a replay, overall and per hook.
type replayTotals struct {
	total   replayTally
	perHook map[string]*replayTally
	order   []string // hooks in order of first appearance
}

// count adds an outcome to the tally of each hook of names.
func (s *replayTotals) count(names []string, r replayResult) {
	for _, h := range names {
		t := s.perHook[h]
		if t == nil {
			t = &replayTally{}
			s.perHook[h] = t
			s.order = append(s.order, h)
		}
		t.add(r)
	}
}

// replay runs every request captured in DIR (serve --capture DIR) through this build's hooks
// and the config, and prints per request whether the outcome is the captured one and, when it
// is not, a diff of the resulting objects; then a summary, overall and per hook. Without
// --undo-key-file it seals with a throwaway key: sealed undos compare as "sealed", and a read
// of an object carrying a sealed undo whose outcome differs is "unverifiable" (neither
// different nor failed). Exit 0: all equal or unverifiable; 1: some differ or could not be replayed (symbolic links and files of other users are
// skipped, each named on stderr); 2: bad flags, no DIR or capture files, a DIR that is a
// symbolic link or writable by group or others, an invalid config.
func (p *Plugin) replay(args []string, stdout, stderr io.Writer) int {
	fs, o := replayFlags()
	fs.SetOutput(stderr)
	dirs, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "synchook replay: "+format+"\n", a...)
		return code
	}
	if len(dirs) != 1 {
		return fail(exitUsage, "want exactly one argument, the capture directory (serve --capture DIR)")
	}
	files, skipped, err := replayInputs(dirs[0], stderr)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	keys, err := offlineKeys(o.undoKeyFile)
	if err != nil {
		return fail(exitUsage, "--undo-key-file: %v", err)
	}
	if o.undoKeyFile == "" {
		fmt.Fprintln(stderr, "synchook replay: no --undo-key-file: sealed with a throwaway key; the reads of objects that carry a sealed undo are unverifiable (give the key the captured synchook used)")
	}
	reg, err := sidecar.BuildRegistry(context.Background(), sidecar.RegistryConfig{
		ConfigFile: o.configFile, NoDefaultConfig: p.hasHooks(), Getenv: p.getenv, Register: p.registerHooks,
		Log: ctrl.Log, Version: Version(), SkipIdempotencyCheck: o.skipIdempotencyCheck, Keys: keys,
	})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	replayer := capture.NewReplayer(reg, o.timeout)
	replayer.ForeignKey = o.undoKeyFile == ""
	progress := newProgress(stderr, len(files))
	totals := &replayTotals{perHook: map[string]*replayTally{}}
	for i, path := range files {
		progress.set(i)
		totals.replayFile(stdout, replayer, progress, path)
	}
	progress.done(len(files))
	totals.print(stdout, len(files), len(skipped))
	if totals.total[resultDifferent] > 0 || totals.total[resultFailed] > 0 || len(skipped) > 0 {
		return exitFailed
	}
	return exitOK
}

// replayInputs returns the capture files of dir that replay may read, naming each file it
// skips on stderr; an error when dir is no directory or has no capture file. Only files of
// this user, and no symbolic links, in a directory that no one else can write: anything else
// may have been planted.
func replayInputs(dir string, stderr io.Writer) ([]string, []capture.Skipped, error) {
	if info, err := os.Stat(dir); err != nil {
		return nil, nil, err
	} else if !info.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a directory", dir)
	}
	files, skipped, err := capture.ReplayFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range skipped {
		fmt.Fprintf(stderr, "synchook replay: skipped %s: %s\n", filepath.Base(s.Path), s.Reason)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no capture files (*.json) to replay in %s", dir)
	}
	return files, skipped, nil
}

// replayFile replays the capture file at path with replayer, prints its outcome on stdout
// (with the diff when it differs) and counts it; bar is cleared before printing.
func (s *replayTotals) replayFile(stdout io.Writer, replayer *capture.Replayer, bar *progress, path string) {
	name := filepath.Base(path)
	rec, err := capture.ReadOwnFile(path)
	if err != nil {
		bar.clear()
		fmt.Fprintf(stdout, "FAILED     %s: %v\n", name, err)
		s.total.add(resultFailed)
		return
	}
	what := describe(rec)
	out, err := replayer.Replay(context.Background(), rec)
	bar.clear()
	if err != nil {
		fmt.Fprintf(stdout, "FAILED     %s %s: %v\n", name, what, err)
		s.total.add(resultFailed)
		s.count(rec.Hooks, resultFailed)
		return
	}
	r := resultDifferent
	switch {
	case out.Equal:
		r = resultEqual
	case out.Unverifiable:
		r = resultUnverifiable
	}
	s.total.add(r)
	s.count(out.Hooks, r)
	switch r {
	case resultEqual:
		fmt.Fprintf(stdout, "equal      %s %s\n", name, what)
	case resultUnverifiable:
		fmt.Fprintf(stdout, "unverifiable %s %s: its sealed undo needs the capture's --undo-key-file to open\n", name, what)
	default:
		fmt.Fprintf(stdout, "DIFFERENT  %s %s\n%s", name, what, out.Diff)
	}
}

// print writes the summary of n requests and skipped files on stdout: the counts, then a
// table per hook.
func (s *replayTotals) print(stdout io.Writer, n, skipped int) {
	fmt.Fprintf(stdout, "\n%d requests: %d equal, %d different, %d failed", n, s.total[resultEqual], s.total[resultDifferent], s.total[resultFailed])
	shown := resultUnverifiable // the results shown per hook: unverifiable only when there are any
	if s.total[resultUnverifiable] > 0 {
		shown = resultCount
		fmt.Fprintf(stdout, ", %d unverifiable (reads of sealed undos: replay with the capture's --undo-key-file)", s.total[resultUnverifiable])
	}
	fmt.Fprintln(stdout)
	if skipped > 0 {
		fmt.Fprintf(stdout, "%d files skipped (symbolic links or files of other users; see stderr)\n", skipped)
	}
	if len(s.order) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "hook\t"+strings.Join(resultNames[:shown], "\t"))
		for _, h := range s.order {
			fmt.Fprint(tw, h)
			for _, n := range s.perHook[h][:shown] {
				fmt.Fprintf(tw, "\t%d", n)
			}
			fmt.Fprintln(tw)
		}
		_ = tw.Flush()
	}
}

// parseInterspersed parses args with fs when the arguments may come before, between or after
// the flags (replay's DIR), and returns the arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if args = fs.Args(); len(args) > 0 {
			rest, args = append(rest, args[0]), args[1:]
		}
	}
	return rest, nil
}

// describe names a record's request: hook type, kind and object.
func describe(rec *capture.Record) string {
	var meta struct {
		Metadata struct{ Namespace, Name string } `json:"metadata"`
	}
	_ = json.Unmarshal(rec.Object, &meta)
	obj := meta.Metadata.Name
	if meta.Metadata.Namespace != "" {
		obj = meta.Metadata.Namespace + "/" + obj
	}
	return fmt.Sprintf("%s %s/%s %s", rec.HookType, rec.APIVersion, rec.Kind, obj)
}

// progress draws a progress bar on stderr when it is a terminal and there are more than 1,000
// requests; otherwise it does nothing.
type progress struct {
	w          io.Writer
	total      int
	last       int // last percentage drawn; -1: none
	drawn      time.Time
	shown, off bool
}

func newProgress(w io.Writer, total int) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, total: total, last: -1, off: !ok || total <= 1000 || !term.IsTerminal(int(f.Fd()))}
}

func (p *progress) set(i int) {
	if p.off {
		return
	}
	pct := i * 100 / p.total
	if pct == p.last && (p.shown || time.Since(p.drawn) < 100*time.Millisecond) {
		return // redrawn when the percentage changes, else at most 10 times a second
	}
	p.last, p.shown, p.drawn = pct, true, time.Now()
	const width = 40
	bar := strings.Repeat("=", pct*width/100) + strings.Repeat(" ", width-pct*width/100)
	fmt.Fprintf(p.w, "\rreplaying [%s] %d/%d", bar, i, p.total)
}

// clear removes the bar before a line is printed on stdout (the same terminal, usually).
func (p *progress) clear() {
	if p.off || !p.shown {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
	p.shown = false
}

func (p *progress) done(n int) {
	if p.off {
		return
	}
	p.clear()
	fmt.Fprintf(p.w, "replayed %d requests\n", n)
}

// install copies the running binary to DIR/plugin (mode 0755), the layout vcluster's plugin
// manager loads v2 plugins from (/plugins/<name>/plugin); the chart's init container runs it
// when the image has no sh to run its default "cp -r /plugin /plugins/<name>".
func install(args []string, stderr io.Writer) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "synchook install: want exactly one argument, the plugin directory (e.g. /plugins/synchook)")
		return exitUsage
	}
	if err := installBinary(args[0]); err != nil {
		fmt.Fprintf(stderr, "synchook install: %v\n", err)
		return exitFailed
	}
	return exitOK
}

func installBinary(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Write beside the target and rename, so a reader never sees a half-written binary.
	tmp, err := os.CreateTemp(dir, ".plugin-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("copy %s: %w", self, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, "plugin"))
}

func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// hclogJSONLogger returns a JSON zap logger at info level whose lines go-plugin reads as hclog
// JSON, so that vcluster shows them: keys @level, @message, @timestamp (hclog's time format),
// @module for the logger name.
func hclogJSONLogger(w io.Writer) logr.Logger {
	cfg := uberzap.NewProductionEncoderConfig()
	cfg.MessageKey, cfg.LevelKey, cfg.TimeKey, cfg.NameKey = "@message", "@level", "@timestamp", "@module"
	cfg.CallerKey, cfg.StacktraceKey = "", ""
	cfg.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02T15:04:05.000000Z07:00")
	sink := zapcore.Lock(zapcore.AddSync(w)) // one line at a time from every goroutine
	core := zapcore.NewCore(&zap.KubeAwareEncoder{Encoder: zapcore.NewJSONEncoder(cfg)}, sink, zapcore.InfoLevel)
	return zapr.NewLogger(uberzap.New(core, uberzap.ErrorOutput(sink)))
}

// newLogger returns the process logger: controller-runtime's zap in --zap-devel mode, else a
// JSON zap logger at --zap-log-level WITHOUT controller-runtime's sampling, which would drop
// all but every 100th identical line past 100 per second (the per-request lines).
func newLogger(o *zap.Options, w io.Writer) logr.Logger {
	if o.Development {
		return zap.New(zap.UseFlagOptions(o), zap.WriteTo(zapcore.Lock(zapcore.AddSync(w))))
	}
	var level zapcore.LevelEnabler = zapcore.InfoLevel
	if o.Level != nil {
		level = o.Level
	}
	setTime := func(c *zapcore.EncoderConfig) { c.EncodeTime = zapcore.RFC3339TimeEncoder }
	var enc zapcore.Encoder
	if o.NewEncoder != nil {
		enc = o.NewEncoder(setTime)
	} else {
		cfg := uberzap.NewProductionEncoderConfig()
		setTime(&cfg)
		enc = zapcore.NewJSONEncoder(cfg)
	}
	sink := zapcore.Lock(zapcore.AddSync(w)) // one line at a time from every goroutine
	core := zapcore.NewCore(&zap.KubeAwareEncoder{Encoder: enc}, sink, level)
	return zapr.NewLogger(uberzap.New(core, uberzap.ErrorOutput(sink), uberzap.AddStacktrace(zapcore.ErrorLevel)))
}

// test runs `synchook test`: the test files below its arguments through this binary's config
// handling and Go hooks (internal/hooktest). Exit 0: every case passed; 1: a case failed; 2: bad
// flags, an invalid test file or config, or no test file.
func (p *Plugin) test(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("synchook test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	update := fs.Bool("update", false, "rewrite the expected objects kept in files (regular files inside the test file's directory) with what the cases give")
	output := fs.String("o", "", `output format: "" (one line per case, like go test) or junit (JUnit XML)`)
	timeout := fs.Duration("timeout", 10*time.Second, "bound on each request")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: synchook test [flags] [DIR|FILE...]   (default .; see docs/testing.md)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if *output != "" && *output != "junit" {
		fmt.Fprintf(stderr, "synchook test: -o %q: want junit (or nothing)\n", *output)
		return exitUsage
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{"."}
	}
	return hooktest.Main(context.Background(), paths, hooktest.Options{Register: p.registerHooks, Update: *update, Timeout: *timeout},
		*output == "junit", stdout, stderr)
}
