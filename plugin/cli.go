package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/hooktest"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undo"
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

type mutateOptions struct {
	configFile, file, hookType, output string
	timeout                            time.Duration
	skipIdempotencyCheck               bool
	undoKeyFile                        string
	namespacesFile                     string
	virtualNamespaces                  bool
	explain                            bool
}

// mutate is `synchook mutate` with the options o; it returns the exit code.
func (p *Plugin) mutate(o *mutateOptions, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := failer(stderr, "mutate")
	if o.file == "" || o.hookType == "" {
		return fail(exitUsage, "-f and --type are required")
	}
	if o.output != "" && o.output != "json" && o.output != "yaml" {
		return fail(exitUsage, "-o %q: want json or yaml (or nothing)", o.output)
	}
	if o.explain && o.output != "" {
		return fail(exitUsage, "--explain prints for people: not with -o %s", o.output)
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
	docs, notes, err := readMutateDocuments(data, what)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	for _, note := range notes {
		fmt.Fprintf(stderr, "synchook mutate: %s\n", note)
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
	results, err := mutateDocuments(ctx, reg, hookType, docs, o.timeout, o.explain)
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
func (p *Plugin) replay(o *replayOptions, dirs []string, stdout, stderr io.Writer) int {
	fail := failer(stderr, "replay")
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
func install(dir string, stderr io.Writer) int {
	if err := installBinary(dir); err != nil {
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
// JSON zap logger WITHOUT controller-runtime's sampling, which would drop all but every 100th
// identical line past 100 per second (the per-request lines), with controller-runtime's
// production defaults for what the flags leave unset: --zap-log-level info,
// --zap-stacktrace-level error, --zap-time-encoding rfc3339.
func newLogger(o *zap.Options, w io.Writer) logr.Logger {
	if o.Development {
		return zap.New(zap.UseFlagOptions(o), zap.WriteTo(zapcore.Lock(zapcore.AddSync(w))))
	}
	var level, stack zapcore.LevelEnabler = zapcore.InfoLevel, zapcore.ErrorLevel
	if o.Level != nil {
		level = o.Level
	}
	if o.StacktraceLevel != nil {
		stack = o.StacktraceLevel
	}
	setTime := func(c *zapcore.EncoderConfig) {
		c.EncodeTime = zapcore.RFC3339TimeEncoder
		if o.TimeEncoder != nil {
			c.EncodeTime = o.TimeEncoder
		}
	}
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
	return zapr.NewLogger(uberzap.New(core, uberzap.ErrorOutput(sink), uberzap.AddStacktrace(stack)))
}

// test runs `synchook test`: the test files below paths (default .) through this binary's config
// handling and Go hooks (internal/hooktest). Exit 0: every case passed; 1: a case failed; 2: an
// invalid test file or config, or no test file.
func (p *Plugin) test(o *testOptions, paths []string, stdout, stderr io.Writer) int {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	return hooktest.Main(context.Background(), paths, hooktest.Options{Register: p.registerHooks, Update: o.update, Timeout: o.timeout, Root: o.root},
		o.output == "junit", stdout, stderr)
}

// failer returns a command's way out: it prints "synchook <command>: " and the message to
// stderr and returns code, the exit code.
func failer(stderr io.Writer, command string) func(code int, format string, a ...any) int {
	return func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "synchook "+command+": "+format+"\n", a...)
		return code
	}
}
