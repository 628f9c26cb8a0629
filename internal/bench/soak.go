package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/patch"
	"github.com/synchook/synchook/webhook"
)

// SoakOptions bounds a soak run. Zero fields take the defaults named on each.
type SoakOptions struct {
	// Mutations is the number of requests. Default 100,000.
	Mutations int
	// Concurrency is the number of concurrent callers. Default 64.
	Concurrency int
	// GRPCPercent is the share of requests sent through the gRPC bridge (new connection per
	// call); the rest go through HTTPS. Default 30.
	GRPCPercent int
	// Out receives the report. Default os.Stdout.
	Out io.Writer
	// RequestTimeout bounds each request: the admission server's RequestTimeout and the gRPC
	// call's deadline. Default webhook.DefaultRequestTimeout (10 s), what `synchook serve`
	// gives a request. An answer past it counts as unexpected.
	RequestTimeout time.Duration
}

// SoakReport is what a soak run saw. Every response is checked: Corrupted counts successful
// answers whose object is not exactly the expected one; Unexpected counts answers of the wrong
// kind (an error where none was due, or the wrong error).
type SoakReport struct {
	Mutations, OK, HookErrors, Panics, Corrupted, Unexpected int
	ByTransport                                              map[string]int
	// Goroutines and RSS (bytes) of this process (client and sidecar) after the first and the
	// last 10% of the requests.
	GoroutinesFirst, GoroutinesLast int
	RSSFirst, RSSLast               int64
	P50, P99                        time.Duration
	Elapsed                         time.Duration
	FirstProblem                    string
}

const (
	soakLabel = "synchook.io/soak"
	chaosKey  = "synchook.io/chaos"
)

func soakRegistry() *engine.Registry {
	reg := engine.NewRegistry(nil)
	for _, kind := range []struct {
		name string
		obj  func() client.Object
	}{{"pod", func() client.Object { return &corev1.Pod{} }}, {"service", func() client.Object { return &corev1.Service{} }}, {"secret", func() client.Object { return &corev1.Secret{} }}} {
		reg.MustRegister(
			hooks.NewFunc("chaos-"+kind.name, kind.obj(), []hooks.HookType{hooks.CreatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
				switch o.GetLabels()[chaosKey] {
				case "error":
					return nil, errors.New("refused by chaos")
				case "panic":
					panic("chaos")
				}
				return o, nil
			}),
			hooks.NewFunc("label-"+kind.name, kind.obj(), []hooks.HookType{hooks.CreatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
				o.GetLabels()[soakLabel] = "true"
				return o, nil
			}),
		)
	}
	return reg
}

// Soak runs opts.Mutations requests for pods, services and secrets at opts.Concurrency through
// an in-process sidecar (HTTPS admission server and gRPC bridge on loopback) whose chaos hook
// refuses 1% of the objects and panics on 0.1%. It checks every answer and prints a report.
func Soak(ctx context.Context, opts SoakOptions) (*SoakReport, error) {
	opts.Mutations = cmp.Or(max(opts.Mutations, 0), 100000)
	opts.Concurrency = cmp.Or(max(opts.Concurrency, 0), 64)
	opts.GRPCPercent = cmp.Or(max(opts.GRPCPercent, 0), 30)
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	opts.RequestTimeout = cmp.Or(max(opts.RequestTimeout, 0), webhook.DefaultRequestTimeout)
	dir, err := os.MkdirTemp("", "synchook-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ca, err := certs.New(certs.Options{Dir: filepath.Join(dir, "certs")})
	if err != nil {
		return nil, err
	}
	if err := ca.Ensure(); err != nil {
		return nil, err
	}
	runner := engine.NewRunner(soakRegistry(), engine.RunnerOptions{MaxConcurrent: 1024})
	ports := [3]int{}
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	httpsAddr, grpcAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	srv, err := webhook.NewServer(runner, webhook.Options{
		BindAddress: httpsAddr, ProbeBindAddress: "0", CertFile: ca.CertFile(), KeyFile: ca.KeyFile(), RequestTimeout: opts.RequestTimeout,
	})
	if err != nil {
		return nil, err
	}
	br, err := bridge.New(runner, bridge.Options{Address: grpcAddr, VClusterAddress: fmt.Sprintf("127.0.0.1:%d", ports[2]), MaxBackoff: time.Minute})
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	var servers sync.WaitGroup
	servers.Add(2)
	go func() { defer servers.Done(); _ = srv.Start(sctx) }()
	go func() { defer servers.Done(); _ = br.Run(sctx) }()
	defer func() { stop(); servers.Wait() }()

	pool, err := certs.LoadCertPool(ca.CAFile())
	if err != nil {
		return nil, err
	}
	d := &soakDriver{
		https: &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}, MaxIdleConnsPerHost: opts.Concurrency * 2,
		}},
		url:      "https://" + httpsAddr + "/mutate/CreatePhysical",
		grpcAddr: grpcAddr,
		opts:     opts,
	}
	if err := waitReady(ctx, pool, "https://"+httpsAddr+"/readyz"); err != nil {
		return nil, err
	}
	rep := d.run(ctx)
	rep.print(opts.Out)
	return rep, nil
}

// waitReady polls url until it answers, for up to 2 minutes (a server starting on a loaded
// 2-core machine) or until ctx ends.
func waitReady(ctx context.Context, pool *x509.CertPool, url string) error {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s never answered", url)
}

type soakDriver struct {
	https    *http.Client
	url      string
	grpcAddr string
	opts     SoakOptions

	mu  sync.Mutex
	rep SoakReport
	lat []time.Duration
}

// outcome of one request as the driver classifies it.
type outcome int

const (
	outOK outcome = iota
	outHookError
	outPanic
	outCorrupted
	outUnexpected
)

func (d *soakDriver) run(ctx context.Context) *SoakReport {
	n, c := d.opts.Mutations, d.opts.Concurrency
	d.rep = SoakReport{Mutations: n, ByTransport: map[string]int{}}
	var next, done atomic.Int64
	first, last := int64(n/10), int64(n-n/10)
	var sampleOnce [2]sync.Once
	sample := func(i int) {
		sampleOnce[i].Do(func() {
			runtime.GC()
			g, rss := runtime.NumGoroutine(), selfRSS()
			d.mu.Lock()
			if i == 0 {
				d.rep.GoroutinesFirst, d.rep.RSSFirst = g, rss
			} else {
				d.rep.GoroutinesLast, d.rep.RSSLast = g, rss
			}
			d.mu.Unlock()
		})
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			objs := soakObjects()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				transport, out, problem := d.one(ctx, i, objs)
				el := time.Since(t0)
				d.record(transport, out, problem, el)
				switch k := done.Add(1); k {
				case first:
					sample(0)
				case last:
					sample(1)
				}
			}
		}()
	}
	wg.Wait()
	d.rep.Elapsed = time.Since(start)
	slices.Sort(d.lat)
	if len(d.lat) > 0 {
		d.rep.P50, d.rep.P99 = d.lat[len(d.lat)/2], d.lat[len(d.lat)*99/100]
	}
	return &d.rep
}

func (d *soakDriver) record(transport string, out outcome, problem string, el time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lat = append(d.lat, el)
	d.rep.ByTransport[transport]++
	switch out {
	case outOK:
		d.rep.OK++
	case outHookError:
		d.rep.HookErrors++
	case outPanic:
		d.rep.Panics++
	case outCorrupted:
		d.rep.Corrupted++
	case outUnexpected:
		d.rep.Unexpected++
	}
	if problem != "" && d.rep.FirstProblem == "" {
		d.rep.FirstProblem = problem
	}
}

// soakObjects returns one pod, service and secret for one caller to reuse.
func soakObjects() []client.Object {
	return []client.Object{fixtures.Pod("ns", "x"), fixtures.Service("ns", "x"), fixtures.Secret("ns", "x", "soak-secret-value")}
}

var soakKinds = []string{"pod", "service", "secret"}

// one sends request i and checks its answer.
func (d *soakDriver) one(ctx context.Context, i int, objs []client.Object) (string, outcome, string) {
	kind := i % 3
	obj := objs[kind]
	name := fmt.Sprintf("obj-%d", i)
	obj.SetName(name)
	labels := obj.GetLabels()
	delete(labels, chaosKey)
	delete(labels, soakLabel)
	want := outOK
	switch {
	case i%100 == 0:
		labels[chaosKey], want = "error", outHookError
	case i%1000 == 1:
		labels[chaosKey], want = "panic", outPanic
	}
	raw := fixtures.JSON(obj)
	labels[soakLabel] = "true"
	expected := fixtures.JSON(obj)
	delete(labels, soakLabel)
	gvk := obj.GetObjectKind().GroupVersionKind()
	hookName := "chaos-" + soakKinds[kind]

	if i%100 < d.opts.GRPCPercent {
		got, msg, err := d.viaGRPC(ctx, gvk, raw, obj)
		out, problem := classify(want, got, msg, err, expected, hookName, name)
		return "grpc", out, problem
	}
	got, msg, err := d.viaHTTPS(ctx, gvk, raw, obj)
	out, problem := classify(want, got, msg, err, expected, hookName, name)
	return "https", out, problem
}

// classify compares an answer with what was due.
func classify(want outcome, got []byte, refusal string, err error, expected []byte, hook, name string) (outcome, string) {
	if err != nil {
		return outUnexpected, fmt.Sprintf("%s: transport error: %v", name, err)
	}
	switch want {
	case outHookError, outPanic:
		marker := "refused by chaos"
		if want == outPanic {
			marker = "panic: chaos"
		}
		if strings.HasSuffix(hook, "-secret") { // a hook's error and panic value on a Secret are withheld
			marker = "its message is withheld"
			if want == outPanic {
				marker = "its panic value is withheld"
			}
		}
		if strings.Contains(refusal, `hook "`+hook+`"`) && strings.Contains(refusal, marker) {
			return want, ""
		}
		return outUnexpected, fmt.Sprintf("%s: want a %q refusal from %s, got %q", name, marker, hook, refusal)
	}
	if refusal != "" {
		return outUnexpected, fmt.Sprintf("%s: unexpected refusal %q", name, refusal)
	}
	if !bytes.Equal(got, expected) {
		return outCorrupted, fmt.Sprintf("%s: object differs from the expected one", name)
	}
	return outOK, ""
}

// viaHTTPS sends an AdmissionReview and returns the patched object re-encoded through a fresh
// typed object, or the refusal message.
func (d *soakDriver) viaHTTPS(ctx context.Context, gvk schema.GroupVersionKind, raw []byte, obj client.Object) ([]byte, string, error) {
	review := reviewFor(raw)
	review = bytes.Replace(review, []byte(`"kind":{"group":"","version":"v1","kind":"Pod"}`),
		[]byte(fmt.Sprintf(`"kind":{"group":"","version":"v1","kind":%q}`, gvk.Kind)), 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(review))
	if err != nil {
		return nil, "", err
	}
	resp, err := d.https.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		return nil, "", fmt.Errorf("status %d, decode: %w", resp.StatusCode, err)
	}
	if out.Response.UID != "bench" {
		return nil, "", fmt.Errorf("response uid %q", out.Response.UID)
	}
	if !out.Response.Allowed {
		return nil, out.Response.Result.Message, nil
	}
	patched, err := patch.Apply(raw, out.Response.Patch)
	if err != nil {
		return nil, "", err
	}
	fresh := obj.DeepCopyObject().(client.Object)
	zero(fresh)
	if err := json.Unmarshal(patched, fresh); err != nil {
		return nil, "", err
	}
	return fixtures.JSON(fresh), "", nil
}

// viaGRPC calls Mutate the way vcluster does and decodes the answer into the original object.
func (d *soakDriver) viaGRPC(ctx context.Context, gvk schema.GroupVersionKind, raw []byte, obj client.Object) ([]byte, string, error) {
	conn, err := grpc.NewClient(d.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, d.opts.RequestTimeout)
	defer cancel()
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	res, err := remote.NewPluginClient(conn).Mutate(ctx, &remote.MutateRequest{ApiVersion: apiVersion, Kind: kind, Object: string(raw), Type: "CreatePhysical"})
	if err != nil {
		if msg := grpcMessage(err); msg != "" {
			return nil, msg, nil
		}
		return nil, "", err
	}
	original := obj.DeepCopyObject().(client.Object)
	zero(original)
	if err := json.Unmarshal(raw, original); err != nil {
		return nil, "", err
	}
	if res.Mutated {
		if err := json.Unmarshal([]byte(res.Object), original); err != nil { // as vcluster does
			return nil, "", err
		}
	}
	return fixtures.JSON(original), "", nil
}

// zero resets obj to its empty value, keeping its Go type.
func zero(obj client.Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		*o = corev1.Pod{}
	case *corev1.Service:
		*o = corev1.Service{}
	case *corev1.Secret:
		*o = corev1.Secret{}
	}
}

func selfRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// grpcMessage returns the message of a gRPC status error from the server (a hook refusal), or
// "" for transport failures.
func grpcMessage(err error) string {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.Unavailable || st.Code() == codes.Canceled {
		return ""
	}
	return st.Message()
}

func (r *SoakReport) print(w io.Writer) {
	fmt.Fprintf(w, "soak: %d mutations in %v (%.0f/s), by transport %v\n", r.Mutations, r.Elapsed.Round(time.Millisecond),
		float64(r.Mutations)/r.Elapsed.Seconds(), r.ByTransport)
	fmt.Fprintf(w, "  ok %d, hook errors %d (expected), panics %d (expected), corrupted %d, unexpected %d\n",
		r.OK, r.HookErrors, r.Panics, r.Corrupted, r.Unexpected)
	fmt.Fprintf(w, "  latency p50 %v p99 %v\n", us(r.P50), us(r.P99))
	fmt.Fprintf(w, "  goroutines after first 10%% %d, after last 10%% %d; RSS %.1f MiB -> %.1f MiB\n",
		r.GoroutinesFirst, r.GoroutinesLast, mib(r.RSSFirst), mib(r.RSSLast))
	if r.FirstProblem != "" {
		fmt.Fprintf(w, "  first problem: %s\n", r.FirstProblem)
	}
}
