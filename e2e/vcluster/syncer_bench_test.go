package vcluster

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Environment of TestVClusterSyncerThroughput.
const (
	// envBenchPods is the number of pods per run (default defaultBenchPods).
	envBenchPods     = "SYNCHOOK_BENCH_PODS"
	defaultBenchPods = 500
	// envBenchRounds is the number of rounds, each running every variant once (default
	// defaultBenchRounds).
	envBenchRounds     = "SYNCHOOK_BENCH_ROUNDS"
	defaultBenchRounds = 5
	// envBenchVariants, when set, runs only the variants with these keys (comma separated,
	// e.g. "c,b'"), for profiling one of them.
	envBenchVariants = "SYNCHOOK_BENCH_VARIANTS"
	// envBenchProfile, when set, is a directory where each run writes CPU profiles of the
	// syncer process and of synchook (SYNCHOOK_PPROF_BIND_ADDRESS), benchProfileSeconds long
	// from the syncer's start: <variant>-<round>-syncer.pprof, <variant>-<round>-synchook.pprof.
	// Profiling costs CPU itself: use it in a run of its own, not in the measured one.
	envBenchProfile     = "SYNCHOOK_BENCH_PROFILE"
	benchProfileSeconds = 10
)

// The label every labelling variant sets on the host pods.
const (
	benchLabelKey   = "vcluster.example.com/tenant"
	benchLabelValue = "team-a"
)

// benchVariant is one plugin setup of TestVClusterSyncerThroughput.
type benchVariant struct {
	key, name string
	// labels: the variant sets benchLabelKey on the host pods (checked after the updates).
	labels bool
	// synchook: the variant loads synchook (its request counts are read from its metrics).
	synchook bool
	plugins  func(tb testing.TB) []syncerPlugin
}

// benchVariants are the variants of issue 26, in the order of the table.
func benchVariants() []benchVariant {
	labelsHook := func(undo bool) map[string]any {
		h := map[string]any{
			"name":      "tenant-label",
			"resources": []any{map[string]any{"apiVersion": "v1", "kind": "Pod"}},
			"types":     []any{"CreatePhysical", "UpdatePhysical"},
			"labels":    map[string]any{"labels": map[string]any{benchLabelKey: benchLabelValue}},
		}
		if !undo {
			h["undo"] = false
		}
		return map[string]any{"hooks": []any{h}}
	}
	sdk := func(hideOnGet bool) func(tb testing.TB) []syncerPlugin {
		return func(tb testing.TB) []syncerPlugin {
			cfg := map[string]any{"types": []any{"CreatePhysical", "UpdatePhysical"}, "hideOnGet": hideOnGet}
			return []syncerPlugin{{Dir: "sdkplugin", Binary: binary(tb, binSDK), Values: map[string]any{"config": cfg}}}
		}
	}
	return []benchVariant{
		{key: "a", name: "no plugin", plugins: func(testing.TB) []syncerPlugin { return nil }},
		{key: "b", name: "sdk-style, Create+UpdatePhysical", labels: true, plugins: sdk(false)},
		{key: "b'", name: "sdk-style, + hides it on GetPhysical", labels: true, plugins: sdk(true)},
		{key: "c", name: "synchook labels (undo on)", labels: true, synchook: true, plugins: func(tb testing.TB) []syncerPlugin {
			return []syncerPlugin{synchookFromPluginYAML(tb, labelsHook(true))}
		}},
		{key: "e", name: "synchook labels, undo: false", labels: true, synchook: true, plugins: func(tb testing.TB) []syncerPlugin {
			return []syncerPlugin{synchookFromPluginYAML(tb, labelsHook(false))}
		}},
		{key: "f", name: "echo, (c)'s hooks, no change", plugins: func(tb testing.TB) []syncerPlugin {
			// (c) registers CreatePhysical and UpdatePhysical and, for its undo, GetPhysical;
			// each run compares the registered hooks with (c)'s (benchRun.hooks)
			cfg := map[string]any{"clientHooks": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "types": []any{"CreatePhysical", "UpdatePhysical", "GetPhysical"}}}}
			return []syncerPlugin{{Dir: "echoplugin", Binary: binary(tb, binEcho), Values: map[string]any{"config": cfg}}}
		}},
		{key: "d", name: "synchook policy: (pool-scheduling)", synchook: true, plugins: func(tb testing.TB) []syncerPlugin {
			return []syncerPlugin{synchookFromPluginYAML(tb, map[string]any{"hooks": namedHooks(tb, syncerHooks, "pool-scheduling")})}
		}},
	}
}

// envBenchBaseline, when set, names a synchook binary of an older build: every synchook variant
// then runs with it too, as its key with a 0 ("c0", "e0", "d0"), in the same rounds.
const envBenchBaseline = "SYNCHOOK_BENCH_BASELINE"

// withBaseline returns variants and, when envBenchBaseline is set, a copy of each synchook
// variant that runs the baseline binary.
func withBaseline(variants []benchVariant) []benchVariant {
	bin := os.Getenv(envBenchBaseline)
	if bin == "" {
		return variants
	}
	out := slices.Clone(variants)
	for _, v := range variants {
		if !v.synchook {
			continue
		}
		b := v
		b.key, b.name = v.key+"0", v.name+", baseline build"
		b.plugins = func(tb testing.TB) []syncerPlugin {
			ps := v.plugins(tb)
			for i := range ps {
				if ps[i].Dir == "synchook" {
					ps[i].Binary = bin
				}
			}
			return ps
		}
		out = append(out, b)
	}
	return out
}

// benchRun is one variant's figures in one round.
type benchRun struct {
	pods     int
	window   time.Duration // first host pod → last write on either side
	cpu      time.Duration // syncer + plugins + both apiservers + both etcds in the window
	syncer   time.Duration // of which the syncer's process group (syncer and plugins)
	labelled int           // host pods with benchLabelKey after the updates
	traced   int           // virtual pods that showed benchLabelKey in any event
	// writes per pod: host (creates and updates of host pods), virtual (updates of virtual
	// pods other than the tenant's own one per pod)
	hostWrites, virtualWrites float64
	calls                     map[string]float64 // synchook requests per pod by hook type
	hooks                     string             // the client hooks the plugins registered
}

func (r benchRun) podsPerS() float64           { return float64(r.pods) / r.window.Seconds() }
func (r benchRun) cpuPerPod() time.Duration    { return r.cpu / time.Duration(r.pods) }
func (r benchRun) syncerPerPod() time.Duration { return r.syncer / time.Duration(r.pods) }

// TestVClusterSyncerThroughput measures vcluster's real syncer syncing N pods (default 500)
// from the virtual cluster to the host and then one tenant update of each, for the variants of
// benchVariants: (a) no plugin; (b) the sdk-style plugin (internal/sdkplugin: typed decode,
// label, encode) on CreatePhysical and UpdatePhysical; (b') the same hiding its label on
// GetPhysical; (c) synchook's labels hook on Create/UpdatePhysical, undo on (as deployed, with
// the managed key Secret); (e) (c) with undo: false; (f) internal/echoplugin registered for
// (c)'s kinds and hook types, answering every call unchanged; (d) synchook's policy: hook.
//
// Every variant runs once per round, ≥ 5 rounds (SYNCHOOK_BENCH_ROUNDS), the order rotating by
// one each round; each run gets fresh apiservers. The pods are created before the syncer
// starts; when all are on the host, the tenant patches a label on each. The window runs from
// the first host pod to the last write seen on pods, services or secrets of either side, once
// nothing was written for 2 s (settle's quiet period, which is therefore not in it). CPU is user + system from
// /proc of the syncer's process group (syncer and plugins), both kube-apiservers and both
// etcds, interpolated at the window's ends from 100 ms samples. Per variant it also reports the
// host pods labelled after the updates, the virtual pods that ever showed the label, host and
// virtual writes per pod and synchook's calls per pod by hook type; it fails when a labelling
// variant leaves a host pod unlabelled or when (f) registers other hooks than (c). The host
// client's QPS/burst (vcluster's default 40/80) are raised to 1000/2000 so that the limiter
// does not hide the plugins' cost. Gated by SYNCHOOK_BENCH=1:
//
//	SYNCHOOK_BENCH=1 KUBEBUILDER_ASSETS=... go test -run TestVClusterSyncerThroughput -v -timeout 60m
func TestVClusterSyncerThroughput(t *testing.T) {
	if os.Getenv("SYNCHOOK_BENCH") != "1" {
		t.Skip("set SYNCHOOK_BENCH=1 to measure synced pods per second and CPU per synced pod (minutes)")
	}
	requireEnvtest(t)
	n := positiveEnv(t, envBenchPods, defaultBenchPods)
	rounds := positiveEnv(t, envBenchRounds, defaultBenchRounds)
	variants := withBaseline(benchVariants())
	if keys := os.Getenv(envBenchVariants); keys != "" {
		variants = slices.DeleteFunc(variants, func(v benchVariant) bool { return !slices.Contains(strings.Split(keys, ","), v.key) })
	}
	for _, v := range variants { // build every binary before the first measurement
		v.plugins(t)
	}
	runs := map[string][]benchRun{}
	start := time.Now()
	for r := range rounds {
		for k := range variants {
			v := variants[(r+k)%len(variants)]
			ok := t.Run(fmt.Sprintf("round %d/(%s) %s", r+1, v.key, v.name), func(t *testing.T) {
				run := syncAndUpdate(t, n, v, fmt.Sprintf("%s-%d", strings.ReplaceAll(v.key, "'", "prime"), r+1))
				runs[v.key] = append(runs[v.key], run)
				t.Logf("(%s) %.1f pods/s, CPU %s per pod (syncer+plugins %s), window %s; labelled %d/%d host pods, %d virtual pods showed the label; writes per pod: host %.2f, virtual %.2f; synchook calls per pod %v; hooks %s",
					v.key, run.podsPerS(), run.cpuPerPod().Round(time.Microsecond), run.syncerPerPod().Round(time.Microsecond), run.window.Round(time.Millisecond),
					run.labelled, run.pods, run.traced, run.hostWrites, run.virtualWrites, run.calls, run.hooks)
			})
			if !ok {
				t.FailNow()
			}
		}
	}
	t.Logf("%d rounds of %d variants, %d pods each, in %s", rounds, len(variants), n, time.Since(start).Round(time.Second))
	t.Log("\n" + benchReport(variants, runs))
	if c, f := runs["c"], runs["f"]; len(c) > 0 && len(f) > 0 && c[0].hooks != f[0].hooks {
		t.Errorf("(f) registered %q, (c) %q: the echo floor must hook what (c) hooks", f[0].hooks, c[0].hooks)
	}
}

// positiveEnv returns the positive integer in the environment variable name, def when unset.
func positiveEnv(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// syncAndUpdate is one run of variant v with n pods (TestVClusterSyncerThroughput says what it
// does and measures); it fails t when a labelling variant leaves a host pod without the label.
// id names its profiles (envBenchProfile).
func syncAndUpdate(t *testing.T, n int, v benchVariant, id string) benchRun {
	cl := startClusters(t)
	cl.bootstrap(t, nil)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p-%04d", i)
	}
	parallel(t, names, func(ctx context.Context, name string) error {
		_, err := cl.virtual.cs.CoreV1().Pods(tenantNS).Create(ctx, tenantPod(name, ""), metav1.CreateOptions{})
		return err
	})

	hostEvents := recordEvents(t, cl.host, hostNamespace)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	var fixed []int // the apiservers and etcds
	for _, c := range []*cluster{cl.host, cl.virtual} {
		etcd, apiserver, err := c.pids()
		if err != nil {
			t.Fatal(err)
		}
		fixed = append(fixed, etcd, apiserver)
	}
	sampler := &cpuSampler{fixed: fixed}
	env := []string{"VCLUSTER_PHYSICAL_CLIENT_QPS=1000", "VCLUSTER_PHYSICAL_CLIENT_BURST=2000"}
	profileDir := os.Getenv(envBenchProfile)
	profiles := map[string]string{} // file name → pprof address
	if profileDir != "" {
		profiles[id+"-syncer.pprof"], profiles[id+"-synchook.pprof"] = freeAddr(t), freeAddr(t)
		env = append(env, envSyncerPprof+"="+profiles[id+"-syncer.pprof"], "SYNCHOOK_PPROF_BIND_ADDRESS="+profiles[id+"-synchook.pprof"])
	}
	s := startSyncer(t, cl, syncerSpec{
		Plugins: v.plugins(t),
		Env:     env,
		OnStart: func(pid int) { sampler.start(t, pid) },
	})
	var profiling sync.WaitGroup
	for file, addr := range profiles {
		profiling.Go(func() {
			if err := fetchProfile(t.Context(), addr, filepath.Join(profileDir, file)); err != nil {
				t.Logf("profile %s: %v (no pprof listener: not synchook, or a synchook without %s)", file, err, "SYNCHOOK_PPROF_BIND_ADDRESS")
			}
		})
	}
	defer profiling.Wait()

	hostPods := func(ev recordedEvent) bool {
		return ev.kind == kindPod && ev.obj.GetAnnotations()[objectNamespaceAnnotation] == tenantNS
	}
	// latest returns the newest recorded version of every host pod, by its virtual name.
	latest := func() map[string]object {
		evs, err := hostEvents.since(time.Time{}, hostPods)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]object{}
		for _, ev := range evs {
			out[ev.obj.GetAnnotations()[objectNameAnnotation]] = ev.obj
		}
		return out
	}
	waitFor(t, 10*time.Minute, "every pod on the host", func(context.Context) (bool, string, error) {
		got := len(latest())
		return got == n, fmt.Sprintf("%d of %d host pods", got, n), nil
	})
	parallel(t, names, func(ctx context.Context, name string) error {
		_, err := cl.virtual.cs.CoreV1().Pods(tenantNS).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"step":"2"}}}`), metav1.PatchOptions{})
		return err
	})
	waitFor(t, 10*time.Minute, "every tenant update on the host", func(context.Context) (bool, string, error) {
		updated := 0
		for _, o := range latest() {
			if o.GetLabels()["step"] == "2" {
				updated++
			}
		}
		return updated == n, fmt.Sprintf("%d of %d host pods updated", updated, n), nil
	})
	recorders := []*eventRecorder{hostEvents, virtualEvents}
	settle(t, recorders, nil)

	all := func(r *eventRecorder) []recordedEvent {
		evs, err := r.since(time.Time{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	hostAll, virtualAll := all(hostEvents), all(virtualEvents)
	var first, last time.Time
	for _, ev := range hostAll {
		if hostPods(ev) && ev.typ == watch.Added && first.IsZero() {
			first = ev.at
		}
	}
	for _, evs := range [][]recordedEvent{hostAll, virtualAll} {
		if at := evs[len(evs)-1].at; at.After(last) {
			last = at
		}
	}
	run := benchRun{pods: n, window: last.Sub(first)}
	run.cpu, run.syncer = sampler.between(t, first, last)

	for _, o := range latest() {
		if o.GetLabels()[benchLabelKey] == benchLabelValue {
			run.labelled++
		}
	}
	traced := map[string]bool{}
	var virtualUpdates int
	for _, ev := range virtualAll {
		if ev.kind != kindPod {
			continue
		}
		if ev.typ == watch.Modified {
			virtualUpdates++
		}
		if _, ok := ev.obj.GetLabels()[benchLabelKey]; ok {
			traced[ev.obj.GetName()] = true
		}
	}
	run.traced = len(traced)
	var hostWrites int
	for _, ev := range hostAll {
		if hostPods(ev) && (ev.typ == watch.Added || ev.typ == watch.Modified) {
			hostWrites++
		}
	}
	run.hostWrites = float64(hostWrites) / float64(n)
	run.virtualWrites = float64(virtualUpdates-n) / float64(n) // less the tenant's own update
	run.hooks = s.clientHooks()
	if v.synchook {
		run.calls = callsByType(t, s, n)
	}
	if v.labels && run.labelled != n {
		t.Errorf("(%s) %d of %d host pods carry %s=%s after the tenant's updates", v.key, run.labelled, n, benchLabelKey, benchLabelValue)
	}
	return run
}

// fetchProfile writes the CPU profile of benchProfileSeconds that the pprof listener at addr
// takes to file.
func fetchProfile(ctx context.Context, addr, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, benchProfileSeconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", addr, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// parallel runs do for every name on 8 workers and fails tb with the first error.
func parallel(tb testing.TB, names []string, do func(ctx context.Context, name string) error) {
	tb.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				if err := do(tb.Context(), names[i]); err != nil {
					errs <- fmt.Errorf("%s: %w", names[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
}

// callsByType returns synchook's requests per pod by hook type (the whole run, startup
// included); it fails tb when synchook serves no metrics.
func callsByType(tb testing.TB, s *syncer, n int) map[string]float64 {
	tb.Helper()
	samples, err := s.metricSamples(tb.Context(), "synchook_requests_total")
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for labels, v := range samples {
		if metricLabel(labels, "gvk") == "v1/Pod" {
			out[metricLabel(labels, "hook_type")] += v / float64(n)
		}
	}
	return out
}

// metricLabel returns the value of label name in a sample's label set as metricSamples keys it
// ({a="x",b="y"}); "" when absent.
func metricLabel(labels, name string) string {
	for _, l := range strings.Split(strings.Trim(labels, "{}"), ",") {
		if k, v, ok := strings.Cut(l, "="); ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// cpuSampler samples, every 100 ms, the CPU time of a syncer's process group and of fixed
// processes (the apiservers and etcds), from start until the test ends.
type cpuSampler struct {
	fixed []int
	mu    sync.Mutex
	at    []time.Time
	group []time.Duration // the syncer's process group
	total []time.Duration // group + fixed
}

// start begins sampling with the syncer's process group pgid.
func (c *cpuSampler) start(tb testing.TB, pgid int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	tb.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now()
			group, _ := groupCPU(pgid)
			total := group
			for _, pid := range c.fixed {
				if st, err := readStat(pid); err == nil {
					total += st.cpu
				}
			}
			c.mu.Lock()
			c.at, c.group, c.total = append(c.at, now), append(c.group, group), append(c.total, total)
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// between returns the CPU time used from from to to, in all and by the syncer's group, each
// interpolated linearly between the samples around the two times.
func (c *cpuSampler) between(tb testing.TB, from, to time.Time) (total, group time.Duration) {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	at := func(series []time.Duration, t time.Time) time.Duration {
		i, _ := slices.BinarySearchFunc(c.at, t, func(a, b time.Time) int { return a.Compare(b) })
		if i == 0 || i == len(c.at) {
			tb.Fatalf("no CPU samples around %s (samples %s to %s)", t.Format(time.StampMilli), c.at[0].Format(time.StampMilli), c.at[len(c.at)-1].Format(time.StampMilli))
		}
		a, b := c.at[i-1], c.at[i]
		frac := float64(t.Sub(a)) / float64(b.Sub(a))
		return series[i-1] + time.Duration(frac*float64(series[i]-series[i-1]))
	}
	return at(c.total, to) - at(c.total, from), at(c.group, to) - at(c.group, from)
}

// benchReport is the table and the ratios of TestVClusterSyncerThroughput: per variant the
// median (min–max) over its runs, and per round the ratios of (c) to (b'), (f) and others.
func benchReport(variants []benchVariant, runs map[string][]benchRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| variant | pods/s | CPU per pod, ms | of which syncer+plugins, ms | host pods labelled | virtual pods with the label | host writes/pod | virtual writes/pod | synchook calls/pod |\n")
	fmt.Fprintf(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, v := range variants {
		rs := runs[v.key]
		if len(rs) == 0 {
			continue
		}
		pick := func(f func(benchRun) float64) string {
			var xs []float64
			for _, r := range rs {
				xs = append(xs, f(r))
			}
			return spread("%.3g", xs)
		}
		labelled, traced := minMaxInt(rs, func(r benchRun) int { return r.labelled }), minMaxInt(rs, func(r benchRun) int { return r.traced })
		if !v.labels {
			labelled = "–"
		}
		calls := "–"
		if v.synchook {
			var parts []string
			for _, typ := range slices.Sorted(maps.Keys(rs[0].calls)) {
				parts = append(parts, fmt.Sprintf("%s %s", strings.TrimSuffix(typ, "Physical"), pick(func(r benchRun) float64 { return r.calls[typ] })))
			}
			calls = strings.Join(parts, ", ")
		}
		fmt.Fprintf(&b, "| (%s) %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v.key, v.name,
			pick(benchRun.podsPerS),
			pick(func(r benchRun) float64 { return float64(r.cpuPerPod()) / 1e6 }),
			pick(func(r benchRun) float64 { return float64(r.syncerPerPod()) / 1e6 }),
			labelled, traced,
			pick(func(r benchRun) float64 { return r.hostWrites }),
			pick(func(r benchRun) float64 { return r.virtualWrites }),
			calls)
	}
	ratio := func(what, num, den string, f func(benchRun) float64) {
		rn, rd := runs[num], runs[den]
		if len(rn) == 0 || len(rn) != len(rd) {
			return
		}
		var xs []float64
		for i := range rn {
			xs = append(xs, f(rn[i])/f(rd[i]))
		}
		fmt.Fprintf(&b, "\n(%s)/(%s) %s, per round: %s", num, den, what, spread("%.3g", xs))
	}
	cpu := func(r benchRun) float64 { return float64(r.cpuPerPod()) }
	syncerCPU := func(r benchRun) float64 { return float64(r.syncerPerPod()) }
	ratio("CPU per pod", "c", "b'", cpu)
	ratio("pods/s", "c", "b'", benchRun.podsPerS)
	ratio("CPU per pod", "c", "f", cpu)
	ratio("syncer+plugins CPU per pod", "c", "b'", syncerCPU)
	ratio("syncer+plugins CPU per pod", "c", "f", syncerCPU)
	ratio("CPU per pod", "e", "b", cpu)
	ratio("CPU per pod", "b'", "f", cpu)
	ratio("CPU per pod", "c", "a", cpu)
	ratio("CPU per pod", "d", "c", cpu)
	for _, k := range []string{"c", "e", "d"} { // this build against the baseline (envBenchBaseline)
		if len(runs[k+"0"]) > 0 {
			ratio("CPU per pod", k, k+"0", cpu)
			ratio("pods/s", k, k+"0", benchRun.podsPerS)
			ratio("syncer+plugins CPU per pod", k, k+"0", syncerCPU)
		}
	}
	return b.String()
}

// minMaxInt formats the range of f over rs: "v" when all are equal, else "lo–hi".
func minMaxInt(rs []benchRun, f func(benchRun) int) string {
	lo, hi := f(rs[0]), f(rs[0])
	for _, r := range rs {
		lo, hi = min(lo, f(r)), max(hi, f(r))
	}
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// namedHooks returns the hooks of the YAML list y with the given names; it fails tb when one
// is missing (a benchmark variant must never run an empty config).
func namedHooks(tb testing.TB, y string, names ...string) []any {
	tb.Helper()
	var out []any
	for _, h := range yamlList(tb, y) {
		if m, ok := h.(map[string]any); ok && slices.Contains(names, fmt.Sprint(m["name"])) {
			out = append(out, h)
		}
	}
	if len(out) != len(names) {
		tb.Fatalf("hooks %v: found %d of them", names, len(out))
	}
	return out
}
