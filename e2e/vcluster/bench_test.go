package vcluster

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

// benchCallers is the number of concurrent MutateObject callers of the parallel benchmarks,
// the syncer's worker goroutines.
const benchCallers = 16

// benchPlugin is one plugin of the benchmark, loaded by its own manager.
type benchPlugin struct {
	name string
	spec func(tb testing.TB) pluginSpec
	// label is a label the plugin adds to benchPod, checked once before timing.
	label string
	// pool is the spec.nodeSelector pool the plugin sets instead (the typed variants).
	pool string
	// vs names the plugin its ops/s are compared with (default "sdk-style").
	vs string
	// bounds name the plugins whose ratios to vs bound this one's (reported as the differences).
	bounds []string
}

// benchPlugins are synchook (config: synchookConfig, whose pod hook adds a label and an
// annotation on CreatePhysical), the sdk-style reference (decode into *corev1.Pod, set one
// label, encode) and the echo floor (answers the object back).
var benchPlugins = []benchPlugin{
	{name: "synchook", spec: func(tb testing.TB) pluginSpec { return synchookPlugin(tb, synchookConfig) }, label: "vcluster.example.com/tenant"},
	{name: "sdk-style", spec: func(tb testing.TB) pluginSpec { return pluginSpec{Dir: binSDK, Binary: binary(tb, binSDK)} }, label: "vcluster.example.com/tenant"},
	{name: "echo", spec: func(tb testing.TB) pluginSpec { return pluginSpec{Dir: binEcho, Binary: binary(tb, binEcho)} }},
}

// typedBenchPlugins are the typed variants TestV2Throughput adds: synchook-typed, a Go hook
// built on synchook's public SDK (internal/gohook: hooks.Typed on *corev1.Pod) that sets
// spec.nodeSelector's pool — what a hook ported from vcluster-sdk does — against sdk-typed, the
// sdk-style plugin making the same change (decode, change, encode); and two bounds on
// synchook-typed's ratio (internal/gohook/bound.go): typed-bound, synchook's plugin server whose
// handler only decodes the Pod as synchook does and answers the request back (the change lost:
// the most any plugin could reach on this shared cost), and typed-encode, the same that answers
// the hooked Pod encoded as the sdk-style plugin does (the least a correct plugin does).
var typedBenchPlugins = []benchPlugin{
	{name: "synchook-typed", spec: func(tb testing.TB) pluginSpec {
		return pluginSpec{Dir: "synchook-typed", Binary: goHookBinaryOf(tb, "nodeSelector", "tenants", "bench")}
	}, pool: "tenants", vs: "sdk-typed", bounds: []string{"typed-bound", "typed-encode"}},
	{name: "typed-bound", spec: func(tb testing.TB) pluginSpec {
		return pluginSpec{Dir: "typed-bound", Binary: goHookBinaryOf(tb, "bound", "tenants", "bench")}
	}, vs: "sdk-typed"},
	{name: "typed-encode", spec: func(tb testing.TB) pluginSpec {
		return pluginSpec{Dir: "typed-encode", Binary: goHookBinaryOf(tb, "bound-encode", "tenants", "bench")}
	}, pool: "tenants", vs: "sdk-typed"},
	{name: "sdk-typed", spec: func(tb testing.TB) pluginSpec {
		return pluginSpec{Dir: "sdk-typed", Binary: binary(tb, binSDK), Config: map[string]any{"nodePool": "tenants"}}
	}, pool: "tenants"},
}

// BenchmarkV2MutatePod measures vcluster's plugin v2 manager calling MutateObject
// (CreatePhysical) on a ~5 KiB pod, each call on a fresh deep copy: the syncer's cost per
// object written to the host, for synchook and the reference plugins, with one caller and with
// benchCallers concurrent callers. ops/s is reported; compare the plugins within one run.
func BenchmarkV2MutatePod(b *testing.B) {
	sealWithKey(b)
	pod := benchPod()
	for _, p := range benchPlugins {
		b.Run(p.name, func(b *testing.B) {
			m := mustStartManager(b.Context(), b, p.spec(b))
			checkBenchPlugin(b.Context(), b, m, p, pod)

			b.Run("sequential", func(b *testing.B) {
				ctx := b.Context()
				b.ReportAllocs()
				for b.Loop() {
					if err := m.MutateObject(ctx, pod.DeepCopy(), createPhysical, scheme.Scheme); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})

			b.Run(strconv.Itoa(benchCallers)+"-callers", func(b *testing.B) {
				ctx := b.Context()
				b.ReportAllocs()
				b.SetParallelism(parallelismFor(benchCallers))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := m.MutateObject(ctx, pod.DeepCopy(), createPhysical, scheme.Scheme); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
		})
	}
}

// BenchmarkV2ManagerJSON is the part of MutateObject that is the manager's own work, without
// a plugin: json.Marshal of the object and json.Unmarshal of the answer into it (the answer
// here is the object's own encoding, as the echo plugin sends back). BenchmarkV2MutatePod's
// echo minus this is vcluster's gRPC round trip.
func BenchmarkV2ManagerJSON(b *testing.B) {
	pod := benchPod()
	b.ReportAllocs()
	for b.Loop() {
		obj := pod.DeepCopy()
		encoded, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(encoded, obj); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// sealWithKey gives the synchook plugins that tb starts an undo key, so that they seal their
// undos as deployed: in vcluster synchook reads it from the key Secret it manages in the host
// namespace; this manager's host cannot be reached, so the key comes from a file
// (SYNCHOOK_UNDO_KEY_FILE, which the plugin inherits from this process) made by
// `synchook undo-key`. A build that has no undo-key command (before sealed undo) runs without.
func sealWithKey(tb testing.TB) {
	tb.Helper()
	ring, err := exec.Command(binary(tb, binSynchook), "undo-key").Output()
	if err != nil {
		tb.Logf("synchook undo-key: %v: synchook runs without an undo key (a build before sealed undo)", err)
		return
	}
	file := filepath.Join(tb.TempDir(), "undo-keys")
	if err := os.WriteFile(file, ring, 0o600); err != nil {
		tb.Fatal(err)
	}
	tb.Setenv("SYNCHOOK_UNDO_KEY_FILE", file)
	tb.Logf("synchook seals its undos with a key from %s", file)
}

// parallelismFor returns the b.SetParallelism value that makes RunParallel start at least n
// goroutines (exactly n when GOMAXPROCS divides n, as with 2 cores).
func parallelismFor(n int) int {
	procs := runtime.GOMAXPROCS(0)
	return max(1, (n+procs-1)/procs)
}

// checkBenchPlugin makes one call outside the timing and checks that the plugin did its work.
func checkBenchPlugin(ctx context.Context, tb testing.TB, m *v2.Manager, p benchPlugin, pod *corev1.Pod) {
	tb.Helper()
	got := pod.DeepCopy()
	if err := m.MutateObject(ctx, got, createPhysical, scheme.Scheme); err != nil {
		tb.Fatalf("%s: MutateObject: %v", p.name, err)
	}
	if p.label != "" && got.Labels[p.label] == "" {
		tb.Fatalf("%s: label %s not set: %v", p.name, p.label, got.Labels)
	}
	if p.pool != "" && got.Spec.NodeSelector["pool"] != p.pool {
		tb.Fatalf("%s: nodeSelector pool %s not set: %v", p.name, p.pool, got.Spec.NodeSelector)
	}
}

// TestV2Throughput runs the benchmark's plugins interleaved in short slices, so that they see
// the same machine conditions, in rounds: every round gives each plugin the same number of
// slices, with one caller and with benchCallers callers, and yields its own ratios
// synchook/sdk-style and echo/sdk-style. It logs, per number of callers, the median and the
// range over the rounds of ops/s and of those ratios, and the CPU time per call of the plugin
// process and of this process (vcluster's side), which a busy machine disturbs less than
// ops/s. It never asserts timings. Linux only (/proc).
//
//	SYNCHOOK_BENCH=1 [SYNCHOOK_BENCH_ROUNDS=5] [SYNCHOOK_BENCH_SECONDS=1.5] go test -run TestV2Throughput -v
//
// SYNCHOOK_BENCH_SECONDS is the time per plugin, mode and round. SYNCHOOK_BENCH_BASELINE, when
// set, names another synchook binary (an older build) that runs with the same config as one
// more plugin, "baseline", in the same rounds; SYNCHOOK_BENCH_BASELINE_REPO, when set, names an
// older synchook repository that the typed Go hook is also built against, "baseline-typed".
// SYNCHOOK_BENCH_PERF=<dir>, when set, records a CPU profile of each plugin process and of
// vcluster's side after the rounds (profilePlugins: Linux perf on PATH, allowed to attach).
//
// Besides the config-labels plugins it runs the typed variants (typedBenchPlugins):
// synchook-typed against sdk-typed.
func TestV2Throughput(t *testing.T) {
	if os.Getenv("SYNCHOOK_BENCH") != "1" {
		t.Skip("set SYNCHOOK_BENCH=1 to measure throughput")
	}
	perRound := 1500 * time.Millisecond // per plugin, mode and round
	if s := os.Getenv("SYNCHOOK_BENCH_SECONDS"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 {
			t.Fatalf("SYNCHOOK_BENCH_SECONDS=%q: want a positive number", s)
		}
		perRound = time.Duration(f * float64(time.Second))
	}
	rounds := 5
	if s := os.Getenv("SYNCHOOK_BENCH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("SYNCHOOK_BENCH_ROUNDS=%q: want a positive number", s)
		}
		rounds = n
	}
	sealWithKey(t)
	const slice = 250 * time.Millisecond
	sliceCount := max(1, int(perRound/slice))

	ctx := t.Context()
	pod := benchPod()
	t.Logf("pod: %d bytes of JSON; GOMAXPROCS %d; %d rounds of %d slices of %s per plugin and mode",
		len(mustJSON(t, pod)), runtime.GOMAXPROCS(0), rounds, sliceCount, slice)
	plugins := slices.Concat(benchPlugins, typedBenchPlugins)
	if repo := os.Getenv("SYNCHOOK_BENCH_BASELINE_REPO"); repo != "" {
		plugins = append(plugins, benchPlugin{
			name: "baseline-typed",
			spec: func(tb testing.TB) pluginSpec {
				return pluginSpec{Dir: "synchook-typed-baseline", Binary: goHookBinaryIn(tb, repo, "nodeSelector", "tenants", "bench")}
			},
			pool: "tenants", vs: "sdk-typed",
		})
	}
	if bin := os.Getenv("SYNCHOOK_BENCH_BASELINE"); bin != "" {
		plugins = append(plugins, benchPlugin{
			name: "baseline",
			spec: func(tb testing.TB) pluginSpec {
				return pluginSpec{Dir: "synchook-baseline", Binary: bin, Config: hookConfig(tb, synchookConfig)}
			},
			label: "vcluster.example.com/tenant",
		})
	}
	managers := make([]*v2.Manager, len(plugins))
	for i, p := range plugins {
		managers[i] = mustStartManager(ctx, t, p.spec(t))
		checkBenchPlugin(ctx, t, managers[i], p, pod)
	}

	pids := make([]int, len(plugins))
	for i, m := range managers {
		pids[i] = m.Plugins[0].Client.ReattachConfig().Pid
	}

	modes := []int{1, benchCallers}
	// rates[m][i][r]: ops/s of plugin i with modes[m] callers in round r; costs[m][i][r]: its CPU
	// per call in that round, the plugin process's and this one's (vcluster's side) together
	rates := make([][][]float64, len(modes))
	costs := make([][][]float64, len(modes))
	ops := make([][]int64, len(modes))
	pluginCPU := make([][]time.Duration, len(modes))  // the plugin process
	managerCPU := make([][]time.Duration, len(modes)) // this process: vcluster's side
	for m, callers := range modes {
		rates[m] = make([][]float64, len(plugins))
		costs[m] = make([][]float64, len(plugins))
		ops[m] = make([]int64, len(plugins))
		pluginCPU[m] = make([]time.Duration, len(plugins))
		managerCPU[m] = make([]time.Duration, len(plugins))
		// warm up every plugin (connections, the plugins' and our caches) untimed
		for i := range plugins {
			if _, _, err := runSlice(ctx, managers[i], pod, callers, slice); err != nil {
				t.Fatalf("%s: %v", plugins[i].name, err)
			}
		}
	}
	for r := range rounds {
		for m, callers := range modes {
			n := make([]int64, len(plugins))
			elapsed := make([]time.Duration, len(plugins))
			cpu := make([]time.Duration, len(plugins))
			for s := range sliceCount {
				for k := range plugins {
					i := (r + s + k) % len(plugins) // rotate who goes first
					pBefore, mBefore := processCPU(t, pids[i]), processCPU(t, os.Getpid())
					calls, d, err := runSlice(ctx, managers[i], pod, callers, slice)
					if err != nil {
						t.Fatalf("%s: %v", plugins[i].name, err)
					}
					pCPU, mCPU := processCPU(t, pids[i])-pBefore, processCPU(t, os.Getpid())-mBefore
					pluginCPU[m][i] += pCPU
					managerCPU[m][i] += mCPU
					cpu[i] += pCPU + mCPU
					n[i] += calls
					elapsed[i] += d
				}
			}
			for i := range plugins {
				ops[m][i] += n[i]
				rates[m][i] = append(rates[m][i], float64(n[i])/elapsed[i].Seconds())
				costs[m][i] = append(costs[m][i], perCall(cpu[i], n[i]))
			}
		}
	}

	if dir := os.Getenv("SYNCHOOK_BENCH_PERF"); dir != "" {
		profilePlugins(ctx, t, dir, plugins, managers, pids, modes, pod)
	}

	var report strings.Builder
	reference := func(p benchPlugin) int {
		vs := cmp.Or(p.vs, "sdk-style")
		return slices.IndexFunc(plugins, func(q benchPlugin) bool { return q.name == vs })
	}
	for m, callers := range modes {
		fmt.Fprintf(&report, "\n%2d caller(s), median (min-max) of %d rounds:", callers, rounds)
		for i, p := range plugins {
			fmt.Fprintf(&report, "\n    %-14s %s ops/s", p.name, spread("%.0f", rates[m][i]))
			if ref := reference(p); ref != i && p.name != "sdk-typed" {
				rs := ratios(rates[m][i], rates[m][ref])
				fmt.Fprintf(&report, "   %s/%s %s, by round %s", p.name, plugins[ref].name, spread("%.2f", rs), byRound(rs))
				// the same ratio from CPU per call (the reference's over this one's): what the
				// two processes spend, which other work on the machine disturbs less than ops/s
				cs := ratios(costs[m][ref], costs[m][i])
				fmt.Fprintf(&report, "; by CPU per call %s, by round %s", spread("%.2f", cs), byRound(cs))
				for _, name := range p.bounds {
					b := slices.IndexFunc(plugins, func(q benchPlugin) bool { return q.name == name })
					// how far under the bound, round by round: the bound's ratio minus this one's
					under := differences(ratios(rates[m][b], rates[m][ref]), rs)
					underCPU := differences(ratios(costs[m][ref], costs[m][b]), cs)
					fmt.Fprintf(&report, "\n    %-14s under %s (its ratio minus this one's) %s, by round %s; by CPU per call %s, by round %s",
						"", name, spread("%.2f", under), byRound(under), spread("%.2f", underCPU), byRound(underCPU))
				}
			}
		}
		for i, p := range plugins {
			fmt.Fprintf(&report, "\n    %-14s CPU per call: plugin %6.1f µs, vcluster's side %6.1f µs (%d calls)",
				p.name, perCall(pluginCPU[m][i], ops[m][i]), perCall(managerCPU[m][i], ops[m][i]), ops[m][i])
		}
	}
	fmt.Fprintf(&report, "\n    peak resident memory (VmHWM) of each plugin process:")
	for i, p := range plugins {
		fmt.Fprintf(&report, " %s %.1f MiB", p.name, float64(peakRSS(t, pids[i]))/(1<<20))
	}
	t.Log(report.String())
}

// profilePlugins records, after the rounds, a CPU profile of each plugin at each number of
// callers: `perf record -g` (Linux perf, frame-pointer call graphs) of the plugin process and of
// this one (vcluster's manager) while that plugin alone is called for SYNCHOOK_BENCH_PERF_SECONDS
// (default 4), into dir/<plugin>-<callers>.data. Read one with
// `perf report -i FILE --no-children --sort pid,sym --stdio`. The sdk-style plugins are profiled
// as they are built (no profiling code in them), so their binaries stay the ones users run.
func profilePlugins(ctx context.Context, t *testing.T, dir string, plugins []benchPlugin, managers []*v2.Manager, pids []int, modes []int, pod *corev1.Pod) {
	t.Helper()
	seconds := 4.0
	if s := os.Getenv("SYNCHOOK_BENCH_PERF_SECONDS"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 {
			t.Fatalf("SYNCHOOK_BENCH_PERF_SECONDS=%q: want a positive number", s)
		}
		seconds = f
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, p := range plugins {
		for _, callers := range modes {
			out := filepath.Join(dir, fmt.Sprintf("%s-%d.data", p.name, callers))
			cmd := exec.CommandContext(ctx, "perf", "record", "-F", "1999", "-g", "-o", out,
				"-p", strconv.Itoa(pids[i])+","+strconv.Itoa(os.Getpid()))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatalf("perf record: %v", err)
			}
			calls, d, err := runSlice(ctx, managers[i], pod, callers, time.Duration(seconds*float64(time.Second)))
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatalf("stop perf record: %v", err)
			}
			// perf record ends by its own SIGINT: its exit status says so; the data file says
			// whether it recorded.
			if err := cmd.Wait(); err != nil && !strings.Contains(stderr.String(), "Captured and wrote") {
				t.Fatalf("perf record: %v\n%s", err, stderr.String())
			}
			t.Logf("profile %s: %d calls in %s with %d caller(s)", out, calls, d.Round(time.Millisecond), callers)
		}
	}
}

// peakRSS returns the peak resident set size of the process pid so far, in bytes (VmHWM of
// /proc/<pid>/status).
func peakRSS(tb testing.TB, pid int) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		tb.Fatalf("memory of process %d: %v", pid, err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("parse /proc/%d/status: %q", pid, line)
			}
			return kb << 10
		}
	}
	tb.Fatalf("/proc/%d/status has no VmHWM", pid)
	return 0
}

// ratios returns a[r]/b[r] for every round r.
func ratios(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for r := range a {
		out[r] = a[r] / b[r]
	}
	return out
}

// differences returns a[r] - b[r] for every round r.
func differences(a, b []float64) []float64 {
	d := make([]float64, len(a))
	for r := range a {
		d[r] = a[r] - b[r]
	}
	return d
}

// byRound formats xs in round order, for a drift over the rounds (warm-up) to show.
func byRound(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(parts, " ")
}

// spread formats the median of xs and their range, each with format: "m (lo-hi)"; "m" alone
// for one value.
func spread(format string, xs []float64) string {
	sorted := slices.Sorted(slices.Values(xs))
	n := len(sorted)
	median := sorted[n/2]
	if n%2 == 0 {
		median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	if n == 1 {
		return fmt.Sprintf(format, median)
	}
	return fmt.Sprintf(format+" ("+format+"-"+format+")", median, sorted[0], sorted[n-1])
}

func perCall(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}

// processCPU returns the user+system CPU time the process pid has used so far (readStat).
func processCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	st, err := readStat(pid)
	if err != nil {
		tb.Fatalf("CPU time of process %d: %v", pid, err)
	}
	return st.cpu
}

// runSlice calls MutateObject from callers goroutines for d and returns the calls made and
// the time they took.
func runSlice(ctx context.Context, m objectMutator, pod *corev1.Pod, callers int, d time.Duration) (int64, time.Duration, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
		first error
	)
	start := time.Now()
	deadline := start.Add(d)
	for range callers {
		wg.Go(func() {
			var n int64
			var err error
			for time.Now().Before(deadline) {
				if err = m.MutateObject(ctx, pod.DeepCopy(), createPhysical, scheme.Scheme); err != nil {
					break
				}
				n++
			}
			mu.Lock()
			total += n
			if first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return total, time.Since(start), first
}

// benchPod returns a realistic pod as the syncer writes it to the host, about 5 KiB of JSON:
// many labels and annotations, two containers with env, resources and probes, volumes, and a
// status with conditions.
func benchPod() *corev1.Pod {
	labels := map[string]string{
		"app.kubernetes.io/name":       "checkout",
		"app.kubernetes.io/instance":   "checkout-prod",
		"app.kubernetes.io/version":    "4.12.3",
		"app.kubernetes.io/component":  "api",
		"app.kubernetes.io/part-of":    "shop",
		"app.kubernetes.io/managed-by": "helm",
		"pod-template-hash":            "7d9f8b6c5d",
		"vcluster.loft.sh/namespace":   "shop",
		"vcluster.loft.sh/managed-by":  "e2e",
		"team":                         "payments",
		"tier":                         "backend",
		"environment":                  "production",
	}
	annotations := map[string]string{
		"vcluster.loft.sh/object-name":      "checkout-7d9f8b6c5d-x2kqp",
		"vcluster.loft.sh/object-namespace": "shop",
		"vcluster.loft.sh/object-uid":       "4f1c2e7a-9b3d-4c5e-8f6a-1b2c3d4e5f60",
		"vcluster.loft.sh/object-kind":      "Pod",
		"prometheus.io/scrape":              "true",
		"prometheus.io/port":                "9090",
		"prometheus.io/path":                "/metrics",
		"kubectl.kubernetes.io/restartedAt": "2026-11-20T09:14:03Z",
		"checksum/config":                   "9a0364b9e99bb480dd25e1f0284c8555a1f1e8c7d6b5a4f3e2d1c0b9a8f7e6d5",
	}
	res := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	probe := func(path string, port int) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(port), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3, SuccessThreshold: 1,
		}
	}
	ts := metav1.NewTime(time.Date(2026, 11, 20, 9, 14, 5, 0, time.UTC))
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: ts}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              "checkout-7d9f8b6c5d-x2kqp-x-shop-x-e2e",
			Namespace:         "vcluster-e2e",
			UID:               "0e3b2f4a-5c6d-4e7f-8a9b-0c1d2e3f4a5b",
			ResourceVersion:   "184467",
			CreationTimestamp: ts,
			Labels:            labels,
			Annotations:       annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: "e2e", UID: "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d",
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				{
					Name:    "api",
					Image:   "registry.example.com/shop/checkout:4.12.3",
					Command: []string{"/app/checkout"},
					Args:    []string{"--listen=:8080", "--metrics=:9090", "--log-level=info"},
					Ports: []corev1.ContainerPort{
						{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
						{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
					},
					Env: []corev1.EnvVar{
						{Name: "DATABASE_HOST", Value: "postgres.shop.svc.cluster.local"},
						{Name: "DATABASE_PORT", Value: "5432"},
						{Name: "CACHE_URL", Value: "redis://redis.shop.svc.cluster.local:6379/0"},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
						{Name: "DATABASE_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "checkout-db"}, Key: "password"}}},
					},
					Resources:      corev1.ResourceRequirements{Requests: res("250m", "256Mi"), Limits: res("1", "512Mi")},
					LivenessProbe:  probe("/healthz", 8080),
					ReadinessProbe: probe("/readyz", 8080),
					VolumeMounts: []corev1.VolumeMount{
						{Name: "config", MountPath: "/etc/checkout", ReadOnly: true},
						{Name: "tmp", MountPath: "/tmp"},
						{Name: "kube-api-access-5xk2d", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
					},
					TerminationMessagePath:   "/dev/termination-log",
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy:          corev1.PullIfNotPresent,
				},
				{
					Name:  "envoy",
					Image: "envoyproxy/envoy:v1.31.2",
					Args:  []string{"-c", "/etc/envoy/envoy.yaml", "--log-level", "warn"},
					Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}},
					Env: []corev1.EnvVar{
						{Name: "ENVOY_UID", Value: "0"},
						{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
					},
					Resources:                corev1.ResourceRequirements{Requests: res("100m", "64Mi"), Limits: res("500m", "128Mi")},
					ReadinessProbe:           probe("/ready", 15021),
					VolumeMounts:             []corev1.VolumeMount{{Name: "envoy-config", MountPath: "/etc/envoy", ReadOnly: true}},
					TerminationMessagePath:   "/dev/termination-log",
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy:          corev1.PullIfNotPresent,
				},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "checkout-config"}}}},
				{Name: "envoy-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "checkout-envoy"}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access-5xk2d", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vc-kube-api-access-5xk2d-x-shop-x-e2e"}}},
			},
			RestartPolicy:      corev1.RestartPolicyAlways,
			DNSPolicy:          corev1.DNSClusterFirst,
			ServiceAccountName: "vc-workload-e2e",
			NodeName:           "host-node-3",
			SchedulerName:      "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				cond(corev1.PodInitialized), cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled),
			},
			HostIP:    "10.0.1.23",
			PodIP:     "10.244.3.17",
			StartTime: &ts,
			QOSClass:  corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "api", Ready: true, Image: "registry.example.com/shop/checkout:4.12.3", ImageID: "registry.example.com/shop/checkout@sha256:5f0c1f3a", ContainerID: "containerd://8c1e2f", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts}}},
				{Name: "envoy", Ready: true, Image: "envoyproxy/envoy:v1.31.2", ImageID: "docker.io/envoyproxy/envoy@sha256:a1b2c3d4", ContainerID: "containerd://3d4e5f", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts}}},
			},
		},
	}
}
