package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// FailingHookThreshold is how many failures in a row make a hook "keep failing" (logged).
const FailingHookThreshold = 10

// Transport names used as the transport label.
const (
	TransportAdmission = "admission" // HTTPS admission endpoint
	TransportGRPC      = "grpc"      // vcluster plugin v1 bridge
	TransportPluginV2  = "pluginv2"  // vcluster plugin v2 (go-plugin)
)

var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "synchook_requests_total", Help: "Requests by transport, hook type, GVK and result.",
	}, []string{"transport", "hook_type", "gvk", "result"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "synchook_request_duration_seconds", Help: "Time to answer one request, in seconds.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 10},
	}, []string{"transport", "hook_type", "gvk"})
	hookDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "synchook_hook_duration_seconds", Help: "Time of one hook call, in seconds.",
		Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .01, .1, 1, 10},
	}, []string{"hook", "hook_type"})
	hookFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "synchook_hook_failures_total", Help: "Hook calls that returned an error or panicked.",
	}, []string{"hook", "hook_type", "reason"})
	patchOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "synchook_patch_operations_total", Help: "JSON Patch operations sent.",
	}, []string{"hook_type", "gvk"})
	guardRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "synchook_guard_rejections_total", Help: "Changes to apiVersion, kind, name, namespace or uid refused.",
	}, []string{"hook_type", "gvk"})
	inflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "synchook_inflight_requests", Help: "Requests being answered now.",
	}, []string{"transport"})
	loopsDetected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "synchook_loops_detected_total", Help: "Objects that an Update chain patched identically again and again: the syncer keeps undoing the hook.",
	}, []string{"hook"})
	undoRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "synchook_undo_rejected_total", Help: "synchook.io/undo annotations a read dropped instead of applying, by reason (too_large, clear_text, no_key, unauthentic, malformed, identity, deadline).",
	}, []string{"reason"})
	undoSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "synchook_undo_entries_skipped_total", Help: "Entries of an applied synchook.io/undo that a read left out because the object as the host stores it changed there, by reason (changed: the host holds another value; held: the host already holds the element; no_place: its place is gone).",
	}, []string{"kind", "reason"})
	undoKeyFallbacks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "synchook_undo_key_fallbacks_total", Help: "Times a vcluster plugin v2 answered Initialize without its undo key Secret (host unreachable, no access): it runs without a key until a background retry gets it.",
	})
	certExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "synchook_certificate_expiry_timestamp_seconds", Help: "NotAfter of the serving certificate, Unix seconds.",
	})
)

// undoRejectedReasons and undoSkippedReasons are every reason label of undoRejected and
// undoSkipped (package undo's Reason* and Skip*); hookFailureReasons those of hookFailures;
// results those of requests (Result); transports those of requests and inflight.
var (
	undoRejectedReasons = []string{undo.ReasonTooLarge, undo.ReasonClearText, undo.ReasonNoKey, undo.ReasonUnauthentic, undo.ReasonMalformed, undo.ReasonIdentity, undo.ReasonDeadline}
	undoSkippedReasons  = []string{undo.SkipChanged, undo.SkipHeld, undo.SkipNoPlace}
	hookFailureReasons  = []string{"error", "panic"}
	results             = []string{"patched", "unchanged", "refused", "invalid", "overloaded", "failed"}
	transports          = []string{TransportAdmission, TransportGRPC, TransportPluginV2}
)

func init() {
	crmetrics.Registry.MustRegister(requests, requestDuration, hookDuration, hookFailures, patchOps, guardRejections, inflight, loopsDetected, undoRejected, undoSkipped, undoKeyFallbacks, certExpiry)
	// Served from the start at zero, as Prometheus recommends for the label values known in
	// advance: a rate over a series that appears at its first event misses that event, and an
	// absent counter cannot be told from one that is not collected. New adds those of a registry.
	for _, reason := range undoRejectedReasons {
		undoRejected.WithLabelValues(reason)
	}
	for _, t := range transports {
		inflight.WithLabelValues(t)
	}
}

// initSeries makes the series of every counter whose label values reg names, at zero when new:
// per (GVK, hook type) the requests of every transport and result, the patch operations and
// the guard rejections; per hook and hook type its failures; per Update chain its loops; per
// kind a read chain serves the skipped undo entries of every reason.
func (r *Recorder) initSeries(reg *engine.Registry) {
	for _, res := range reg.Capabilities().Resources {
		gvk := schema.FromAPIVersionAndKind(res.APIVersion, res.Kind)
		gl := r.gvkLabel(gvk)
		for _, tc := range res.HookTypes {
			t := string(tc.Type)
			patchOps.WithLabelValues(t, gl)
			guardRejections.WithLabelValues(t, gl)
			for _, tr := range transports {
				for _, result := range results {
					requests.WithLabelValues(tr, t, gl, result)
				}
			}
			names := make([]string, 0, len(tc.Hooks))
			for _, h := range tc.Hooks {
				if h == undo.Annotation { // the undo a read applies: no hook of its own
					continue
				}
				names = append(names, h)
				for _, reason := range hookFailureReasons {
					hookFailures.WithLabelValues(h, t, reason)
				}
			}
			if tc.Type.UpdateOf() == tc.Type && len(names) > 0 {
				loopsDetected.WithLabelValues(strings.Join(names, ","))
			}
			if tc.Type.Reads() {
				for _, reason := range undoSkippedReasons {
					undoSkipped.WithLabelValues(gvk.Kind, reason)
				}
			}
		}
	}
}

// Recorder records requests and hook calls for one registry. It implements engine.Observer:
// attach it explicitly with engine.RunnerOptions.Observer. The zero value is not usable: use New.
type Recorder struct {
	gvks map[schema.GroupVersionKind]string // label of every GVK the registry serves
	log  logr.Logger

	mu      sync.Mutex
	failing map[string]int // consecutive failures per hook
}

// New returns a Recorder for reg that logs failing hooks to log. reg must have all its hooks:
// the GVK labels are taken from it once. It records hook calls only where it is a Runner's
// Observer.
func New(reg *engine.Registry, log logr.Logger) *Recorder {
	r := &Recorder{gvks: map[schema.GroupVersionKind]string{}, log: log, failing: map[string]int{}}
	for _, k := range reg.Keys() {
		r.gvks[k.GVK] = k.GVK.GroupVersion().String() + "/" + k.GVK.Kind
	}
	r.initSeries(reg)
	return r
}

// ObserveHook implements engine.Observer.
func (r *Recorder) ObserveHook(hook string, t hooks.HookType, _ schema.GroupVersionKind, d time.Duration, err error) {
	hookDuration.WithLabelValues(hook, string(t)).Observe(d.Seconds())
	r.mu.Lock()
	if err == nil {
		delete(r.failing, hook)
		r.mu.Unlock()
		return
	}
	r.failing[hook]++
	n := r.failing[hook]
	r.mu.Unlock()
	reason := "error"
	var pe *failure.PanicError
	if errors.As(err, &pe) {
		reason = "panic"
	}
	hookFailures.WithLabelValues(hook, string(t), reason).Inc()
	if n%FailingHookThreshold == 0 {
		r.log.Error(errors.New("hook keeps failing"), "hook failed every time in a row",
			"hook", hook, "hookType", t, "failuresInARow", n, "lastReason", reason)
	}
}

// ObserveLoop implements engine.LoopObserver: it counts the loop under the chain's hooks and
// logs one warning naming them, the object's uid and the path that keeps changing.
func (r *Recorder) ObserveLoop(hookNames string, t hooks.HookType, gvk schema.GroupVersionKind, uid, path string) {
	loopsDetected.WithLabelValues(hookNames).Inc()
	r.log.Info("WARNING: loop detected: the syncer keeps undoing what the hook changes",
		"hook", hookNames, "hookType", t, "kind", gvk.Kind, "uid", uid, "path", path)
}

// ObserveUndoRejected implements undo.RejectedObserver: it counts an undo annotation that a read
// dropped (a forged, stale or malformed one: tenant input) by reason. It does not log: a
// tenant could otherwise fill the log.
func (r *Recorder) ObserveUndoRejected(_ hooks.HookType, _ schema.GroupVersionKind, reason string) {
	undoRejected.WithLabelValues(reason).Inc()
}

// ObserveUndoSkipped implements undo.SkippedObserver: it counts the entries of an applied
// undo that a read left out, by kind and reason. It does not log (tenant objects drive it).
func (r *Recorder) ObserveUndoSkipped(_ hooks.HookType, gvk schema.GroupVersionKind, reason string, n int) {
	undoSkipped.WithLabelValues(gvk.Kind, reason).Add(float64(n))
}

// ObserveUndoKeyFallback counts a start without the undo key Secret
// (synchook_undo_key_fallbacks_total; bridgev2.Options.OnKeyFallback).
func (r *Recorder) ObserveUndoKeyFallback() { undoKeyFallbacks.Inc() }

// Start marks a request that began at start as in flight and returns the function that
// records its end.
func (r *Recorder) Start(transport string, t hooks.HookType, gvk schema.GroupVersionKind, start time.Time) func(res engine.Result, err error) {
	g := inflight.WithLabelValues(transport)
	g.Inc()
	return func(res engine.Result, err error) {
		g.Dec()
		gl := r.gvkLabel(gvk)
		requestDuration.WithLabelValues(transport, string(t), gl).Observe(time.Since(start).Seconds())
		requests.WithLabelValues(transport, string(t), gl, Result(res, err)).Inc()
		if res.Operations > 0 {
			patchOps.WithLabelValues(string(t), gl).Add(float64(res.Operations))
		}
		if errors.Is(err, patch.ErrForbiddenPath) {
			guardRejections.WithLabelValues(string(t), gl).Inc()
		}
	}
}

// Result classifies a chain outcome for the result label: patched, unchanged, refused (the hook
// said no), invalid (bad input), overloaded, or failed (panic, deadline, wrong kind, guard).
func Result(res engine.Result, err error) string {
	kind, apiCode := failure.Classify(err)
	switch {
	case err == nil && res.Patch != nil:
		return "patched"
	case err == nil:
		return "unchanged"
	case kind == failure.Refused || kind == failure.APIStatus && apiCode == http.StatusForbidden:
		return "refused"
	case kind == failure.Invalid || kind == failure.APIStatus && apiCode == http.StatusBadRequest:
		return "invalid"
	case kind == failure.Overloaded || kind == failure.APIStatus && apiCode == http.StatusTooManyRequests:
		return "overloaded"
	default:
		return "failed"
	}
}

func (r *Recorder) gvkLabel(gvk schema.GroupVersionKind) string {
	if l, ok := r.gvks[gvk]; ok {
		return l
	}
	return "other"
}

// SetCertificateExpiry sets the certificate expiry gauge to notAfter.
func SetCertificateExpiry(notAfter time.Time) { certExpiry.Set(float64(notAfter.Unix())) }

// Serve serves /metrics in plain HTTP on addr until ctx ends.
func Serve(ctx context.Context, addr string, log logr.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
	return ServeHTTP(ctx, "metrics", addr, mux, log)
}

// ServeHTTP serves h in plain HTTP on addr until ctx ends, then shuts the server down (requests
// in flight get 5 s); what names the listener in its log line and errors ("metrics", "pprof").
func ServeHTTP(ctx context.Context, what, addr string, h http.Handler, log logr.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s listener %q: %w", what, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving "+what, "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s listener: %w", what, err)
	}
	return nil
}
