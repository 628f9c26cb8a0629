package bench

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/fixtures"
	synchooksidecar "github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undo"
)

// Options bounds a load run. Zero fields take the defaults named on each.
type Options struct {
	// Binary is the synchook executable to start as the sidecar. Default: this process's own
	// executable.
	Binary string
	// Concurrency lists the numbers of concurrent callers. Default 1, 16, 64.
	Concurrency []int
	// MaxRequests and MaxDuration bound each measured cell (workload × concurrency), whichever
	// comes first. Defaults 20,000 and 2 s.
	MaxRequests int
	MaxDuration time.Duration
	// Rounds splits every cell into this many slices, and the workloads of one concurrency take
	// turns slice by slice (A B C … A B C …), so that a burst of load from elsewhere on the
	// machine hits all of them alike instead of one whole cell. Round i is the i-th slice of
	// every workload at that concurrency. Every ratio the report prints is computed per round
	// and given as the median and range over the rounds ("1.31x (1.22–1.40)"); the absolute
	// columns (throughput, percentiles, CPU) are over all slices together. Below 3 the range
	// means nothing, and the report says so. Default 4.
	Rounds int
	// Out receives the report. Default os.Stdout.
	Out io.Writer
}

func (o *Options) setDefaults() error {
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable: %w", err)
		}
		o.Binary = exe
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 16, 64}
	}
	o.MaxRequests = cmp.Or(max(o.MaxRequests, 0), 20000)
	o.MaxDuration = cmp.Or(max(o.MaxDuration, 0), 2*time.Second)
	o.Rounds = cmp.Or(max(o.Rounds, 0), 4)
	if o.Out == nil {
		o.Out = os.Stdout
	}
	return nil
}

// benchConfig is the sidecar's config: one label hook on pods, the hot path under test.
const benchConfig = `hooks:
  - name: bench-label
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels:
      labels: {synchook.io/bench: "true"}
`

// Cell is the measurement of one workload at one concurrency.
type Cell struct {
	Workload    string
	Concurrency int
	Requests    int
	Errors      int
	Elapsed     time.Duration
	P50, P99    time.Duration
	P999        time.Duration
	// ServerCPU is the CPU time (user+system) that the process serving the workload (the
	// sidecar, a plugin v2, or the floors' process) spent during the cell.
	ServerCPU time.Duration
	// Rounds are the cell's slices, in the order measured: Rounds[i] ran between the other
	// workloads' i-th slices at the same concurrency. The fields above are over all of them
	// together. Empty in a cell built without per-round data; Print then takes the whole
	// cell as its only round.
	Rounds []Round
}

// Round is one slice of a cell: the requests of one workload in one round.
type Round struct {
	Requests  int
	Errors    int
	Elapsed   time.Duration
	P50       time.Duration // over this slice's requests
	ServerCPU time.Duration // CPU of the serving process during this slice
}

// Throughput is requests per second in this slice.
func (r Round) Throughput() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// rounds returns the cell's rounds, or the whole cell as one round when it has none.
func (c Cell) rounds() []Round {
	if len(c.Rounds) > 0 {
		return c.Rounds
	}
	return []Round{{Requests: c.Requests, Errors: c.Errors, Elapsed: c.Elapsed, P50: c.P50, ServerCPU: c.ServerCPU}}
}

// Throughput is requests per second.
func (c Cell) Throughput() float64 { return float64(c.Requests) / c.Elapsed.Seconds() }

// Report is the result of Run.
type Report struct {
	Cells                  []Cell
	RSSIdle, RSSPeak       int64 // bytes
	DecodeEncodeFloorPerOp time.Duration
	// Rounds is Options.Rounds of the run (0: the most rounds of any cell).
	Rounds int
}

// Find returns the cell of workload at concurrency c.
func (r *Report) Find(workload string, c int) (Cell, bool) {
	for _, cell := range r.Cells {
		if cell.Workload == workload && cell.Concurrency == c {
			return cell, true
		}
	}
	return Cell{}, false
}

// Workload names.
const (
	FloorHTTPS     = "floor (b) https echo, kept conn"
	FloorGRPC      = "floor (c) grpc no-op, new conn/call"
	AdmissionHTTPS = "admission https, kept conn"
	AdmissionUnix  = "admission unix socket"
	BridgeGRPC     = "bridge grpc, new conn/call (vcluster)"
	SDKGRPC        = "sdk-style plugin v1, new conn/call"
	EchoV2         = "floor (d) echo plugin v2, kept conn"
	SDKV2          = "sdk-style plugin v2, kept conn"
	SynchookV2     = "synchook plugin v2, kept conn"
)

// Run starts the sidecar, measures every workload and floor, prints the report to opts.Out
// and returns it.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	pod := fixtures.JSON(fixtures.Pod("ns", "web"))
	review := reviewFor(pod)
	sc, err := startSidecar(ctx, opts.Binary, benchConfig)
	if err != nil {
		return nil, err
	}
	defer sc.stop()

	rep := &Report{Rounds: opts.Rounds}
	rep.DecodeEncodeFloorPerOp = decodeEncodeFloor(pod)
	rep.RSSIdle, _ = sc.rss()

	floors, err := startFloors(ctx, opts.Binary)
	if err != nil {
		return nil, err
	}
	defer floors.stop()
	floorHTTPS, err := floors.echoCaller(review)
	if err != nil {
		return nil, err
	}
	typed := fixtures.Pod("ns", "web")
	floorGRPC := grpcCaller(floors.grpc, typed, false)
	sdkGRPC := grpcCaller(floors.sdk, typed, true)
	v2, err := startPluginsV2(opts.Binary)
	if err != nil {
		return nil, err
	}
	defer stopPluginsV2(v2[:])

	sidecarCPU := sc.cpu
	workloads := []workload{
		{FloorHTTPS, floorHTTPS, floors.cpu},
		{AdmissionHTTPS, sc.admissionHTTPS(review), sidecarCPU},
		{AdmissionUnix, sc.admissionUnix(review), sidecarCPU},
		{FloorGRPC, floorGRPC, floors.cpu},
		{SDKGRPC, sdkGRPC, floors.cpu},
		{BridgeGRPC, grpcCaller(sc.grpcAddr, typed, true), sidecarCPU},
		{EchoV2, v2[0].caller(typed, false), v2[0].cpu},
		{SDKV2, v2[1].caller(typed, true), v2[1].cpu},
		{SynchookV2, v2[2].caller(typed, true), v2[2].cpu},
	}
	if err := warmUp(ctx, workloads); err != nil {
		return nil, err
	}
	rep.Cells = measureAll(ctx, opts, workloads)
	rep.RSSPeak, _ = sc.peakRSS()
	rep.Print(opts.Out)
	return rep, nil
}

// workload is one measured way of calling, and the process that serves it.
type workload struct {
	name string
	call func(context.Context) error
	cpu  func() (time.Duration, error) // CPU of the process that serves the workload
}

// writeKeyFile writes a new undo key ring to dir/undo.keys (mode 0600) and returns its path.
func writeKeyFile(dir string) (string, error) {
	ring, err := undo.GenerateRing()
	if err != nil {
		return "", err
	}
	text, err := ring.MarshalText()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "undo.keys")
	return path, os.WriteFile(path, text, 0o600)
}

// startPluginsV2 starts the plugin v2 processes (the echo and sdk-style reference plugins,
// then synchook with benchConfig), each started and called as vcluster's v2 manager does. On
// an error it stops the ones it started.
//
// synchook gets its undo key from a file (SYNCHOOK_UNDO_KEY_FILE), removed once the plugins have
// started: no Initialize here brings a host to keep it in, and without a key a hooked write is
// refused.
func startPluginsV2(binary string) ([3]*pluginV2, error) {
	var v2 [3]*pluginV2
	keyDir, err := os.MkdirTemp("", "synchook-bench-key-")
	if err != nil {
		return v2, err
	}
	defer os.RemoveAll(keyDir)
	keyFile, err := writeKeyFile(keyDir)
	if err != nil {
		return v2, err
	}
	for i, env := range [][]string{
		{ReferencePluginEnv + "=echo"},
		{ReferencePluginEnv + "=sdk"},
		{"PLUGIN_CONFIG=" + benchConfig, "SYNCHOOK_CONFIG=", synchooksidecar.UndoKeyFileEnvVar + "=" + keyFile},
	} {
		p, err := startPluginV2(binary, env...)
		if err != nil {
			stopPluginsV2(v2[:i])
			return v2, err
		}
		v2[i] = p
	}
	return v2, nil
}

// stopPluginsV2 stops the plugins, the last started first.
func stopPluginsV2(plugins []*pluginV2) {
	for i := len(plugins) - 1; i >= 0; i-- {
		plugins[i].stop()
	}
}

// warmUp calls every workload once, to warm it up and check that it works.
func warmUp(ctx context.Context, workloads []workload) error {
	for _, w := range workloads {
		if err := w.call(ctx); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
	}
	return nil
}

// measureAll measures every workload at each of opts.Concurrency and returns the cells: the
// workloads of one concurrency take turns slice by slice (opts.Rounds slices each, round i
// being every workload's i-th slice), each slice is kept as a Round of its cell, and the CPU
// of the process serving a workload is measured per slice and summed over them.
func measureAll(ctx context.Context, opts Options, workloads []workload) []Cell {
	var cells []Cell
	for _, c := range opts.Concurrency {
		runs := make([]run, len(workloads))
		for range opts.Rounds {
			for i, w := range workloads {
				var cpu0 time.Duration
				if w.cpu != nil {
					cpu0, _ = w.cpu()
				}
				slice := measure(ctx, c, opts.MaxRequests/opts.Rounds, opts.MaxDuration/time.Duration(opts.Rounds), w.call)
				if w.cpu != nil {
					cpu1, _ := w.cpu()
					slice.serverCPU = cpu1 - cpu0
				}
				runs[i].add(slice)
			}
		}
		for i, w := range workloads {
			cells = append(cells, runs[i].cell(w.name, c))
		}
	}
	return cells
}

func reviewFor(obj []byte) []byte {
	return fixtures.JSON(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "bench", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "ns", Name: "web",
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj},
		},
	})
}

// run accumulates the slices of one cell (or is one slice).
type run struct {
	latencies []time.Duration
	errors    int
	elapsed   time.Duration
	serverCPU time.Duration
	rounds    []Round // one per slice added
}

func (r *run) add(slice run) {
	slices.Sort(slice.latencies)
	r.rounds = append(r.rounds, Round{
		Requests: len(slice.latencies), Errors: slice.errors, Elapsed: slice.elapsed,
		P50: percentile(slice.latencies, 0.50), ServerCPU: slice.serverCPU,
	})
	r.latencies = append(r.latencies, slice.latencies...)
	r.errors += slice.errors
	r.elapsed += slice.elapsed
	r.serverCPU += slice.serverCPU
}

// cell is the measurement of all slices together: throughput over their summed wall time,
// percentiles over all their requests; and each slice as a Round.
func (r *run) cell(name string, c int) Cell {
	slices.Sort(r.latencies)
	return Cell{
		Workload: name, Concurrency: c, Requests: len(r.latencies), Errors: r.errors, Elapsed: r.elapsed,
		P50: percentile(r.latencies, 0.50), P99: percentile(r.latencies, 0.99), P999: percentile(r.latencies, 0.999),
		ServerCPU: r.serverCPU, Rounds: r.rounds,
	}
}

// percentile returns the p-quantile (0 ≤ p < 1) of sorted latencies, 0 for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// measure runs call from c goroutines until n requests or d have passed.
func measure(ctx context.Context, c, n int, d time.Duration, call func(context.Context) error) run {
	var next, errs atomic.Int64
	lat := make([][]time.Duration, c)
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(max(n, 1)) && time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := call(ctx); err != nil {
					errs.Add(1)
					continue
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	return run{latencies: slices.Concat(lat...), errors: int(errs.Load()), elapsed: time.Since(start)}
}

// decodeEncodeFloor is floor (a): the mean time of a typed decode + encode of obj.
func decodeEncodeFloor(obj []byte) time.Duration {
	const n = 2000
	start := time.Now()
	for range n {
		var pod corev1.Pod
		_ = kjson.UnmarshalCaseSensitivePreserveInts(obj, &pod)
		_, _ = json.Marshal(&pod)
	}
	return time.Since(start) / n
}

func post(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return nil
}

// noopPlugin answers every Mutate with mutated=false (floor c).
type noopPlugin struct {
	remote.UnimplementedPluginServer
}

func (noopPlugin) Mutate(context.Context, *remote.MutateRequest) (*remote.MutateResult, error) {
	return &remote.MutateResult{}, nil
}

// grpcCaller calls Mutate the way vcluster's plugin v1 manager does: encode the typed object,
// a new connection per call, decode a mutated answer INTO the object. labelled says the answer
// must carry the bench label (false for the no-op floor).
func grpcCaller(addr string, pod *corev1.Pod, labelled bool) func(context.Context) error {
	return func(ctx context.Context) error {
		obj := pod.DeepCopy()
		data, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := remote.NewPluginClient(conn).Mutate(ctx, &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Object: string(data), Type: "CreatePhysical"})
		if err != nil {
			return err
		}
		return readAnswer(obj, res.GetMutated(), res.GetObject(), labelled)
	}
}

// sidecar is a running `synchook serve` child process.
type sidecar struct {
	cmd       *exec.Cmd
	httpsAddr string
	sock      string
	grpcAddr  string
	pool      *x509.CertPool
	dir       string
}
