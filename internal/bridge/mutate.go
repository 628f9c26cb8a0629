package bridge

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"
	"unsafe"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/metrics"
)

// Mutate implements remote.PluginServer with the Bridge's Mutator (see Mutator.Mutate).
func (b *Bridge) Mutate(ctx context.Context, req *remote.MutateRequest) (*remote.MutateResult, error) {
	object, mutated, err := b.mutator.Mutate(ctx, req.GetApiVersion(), req.GetKind(), req.GetType(), req.GetObject())
	if err != nil {
		return nil, err
	}
	return &remote.MutateResult{Object: object, Mutated: mutated}, nil
}

// ClientHook is one hooked GVK and its hook types, as both plugin protocols announce it
// (v1's remote.ClientHook, v2's GetPluginConfig JSON).
type ClientHook struct {
	// APIVersion is group/version, e.g. "v1" or "apps/v1".
	APIVersion string `json:"apiVersion"`
	// Kind is the kind, e.g. "Pod".
	Kind string `json:"kind"`
	// Types are hook types in canonical order, e.g. ["CreatePhysical","UpdatePhysical"].
	Types []string `json:"types"`
}

// MutatorOptions configures a Mutator. Zero fields take the defaults named on each.
type MutatorOptions struct {
	// RequestTimeout bounds the hook chain of one call; the caller's deadline wins when
	// shorter. Default DefaultRequestTimeout (10 s).
	RequestTimeout time.Duration
	// Metrics records every call that reaches a hook chain, when set. Default nil.
	Metrics *metrics.Recorder
	// Transport is the metrics transport label. Default metrics.TransportGRPC.
	Transport string
	// Log receives one line per call (no object data) and errors. Default logr.Discard().
	Log logr.Logger
}

// Mutator answers vcluster plugin Mutate calls (protocol v1 and v2 carry the same four fields
// and the same answer) with a engine.Runner. Create it with NewMutator; the Registry must not
// change after that, unless Refresh follows before it serves. A Mutator is safe for concurrent
// use.
type Mutator struct {
	opts   MutatorOptions
	runner *engine.Runner
	hooks  []ClientHook
}

// NewMutator returns a Mutator that runs calls with runner, with opts (defaults applied). It
// fails when the registry holds an apiVersion that does not parse.
func NewMutator(runner *engine.Runner, opts MutatorOptions) (*Mutator, error) {
	opts.RequestTimeout = cmp.Or(max(opts.RequestTimeout, 0), DefaultRequestTimeout)
	opts.Transport = cmp.Or(opts.Transport, metrics.TransportGRPC)
	m := &Mutator{opts: opts, runner: runner}
	if err := m.Refresh(); err != nil {
		return nil, err
	}
	return m, nil
}

// Refresh reads the registry's hooked GVKs again (ClientHooks), after chains were added to it, e.g. by engine.Registry.CoverUndoReads. Like those
// additions it must happen before the Mutator serves: it is not safe to call concurrently with
// Mutate or ClientHooks. It fails when the registry holds an apiVersion that does not parse,
// and then leaves the Mutator as it was.
func (m *Mutator) Refresh() error {
	reg := m.runner.Registry()
	var clientHooks []ClientHook
	for _, rc := range reg.Capabilities().Resources {
		ch := ClientHook{APIVersion: rc.APIVersion, Kind: rc.Kind}
		for _, ht := range rc.HookTypes {
			ch.Types = append(ch.Types, string(ht.Type))
		}
		clientHooks = append(clientHooks, ch)
		if _, err := schema.ParseGroupVersion(rc.APIVersion); err != nil {
			return fmt.Errorf("apiVersion %q: %w", rc.APIVersion, err)
		}
	}
	m.hooks = clientHooks
	return nil
}

// ClientHooks returns one ClientHook per hooked GVK (in the registry's order) with its hook
// types (in canonical order). The slice is shared: do not change it.
func (m *Mutator) ClientHooks() []ClientHook { return m.hooks }

// Mutate runs the hook chain of (apiVersion, kind, hookType) on object (the JSON of the whole
// object), exactly as POST /mutate/{type} does, and answers
//
//	mutated=false, no object  no hook for (apiVersion, kind, type), a type this project does not
//	                          implement (e.g. ApplyPhysical), or hooks that changed nothing
//	mutated=true, object      the whole hooked object, encoded (engine.Result.Answer) so that
//	                          vcluster's json.Unmarshal into its existing object gives exactly it
//	gRPC status error         see StatusCode; the message names the hook, type and kind
func (m *Mutator) Mutate(ctx context.Context, apiVersion, kind, hookTypeName, object string) (answer string, mutated bool, err error) {
	start := time.Now()
	logAt := func(v int, msg string, kv ...any) { // fields are built only when the line is written
		if l := m.opts.Log.V(v); l.Enabled() {
			l.Info(msg, append([]any{"hookType", hookTypeName, "apiVersion", apiVersion, "kind", kind}, kv...)...)
		}
	}
	hookType, err := hooks.ParseHookType(hookTypeName)
	if err != nil {
		logAt(1, "hook type not implemented, answering unchanged")
		return "", false, nil
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || gv.Version == "" {
		return "", false, status.Errorf(codes.InvalidArgument, "apiVersion %q kind %q: not a resource kind", apiVersion, kind)
	}
	gvk := gv.WithKind(kind)
	if !m.runner.Registry().Has(gvk, hookType) {
		logAt(1, "no hooks, answering unchanged")
		return "", false, nil
	}

	// A graceful stop lets this call finish; only the caller's deadline and ours apply.
	ctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	// The request and the answer are large (the whole object) and read only from here on:
	// neither is copied between string and []byte.
	raw := unsafe.Slice(unsafe.StringData(object), len(object))
	record := func(engine.Result, error) {}
	if rec := m.opts.Metrics; rec != nil {
		record = rec.Start(m.opts.Transport, hookType, gvk, start)
	}
	res, err := m.runner.Mutate(ctx, gvk, hookType, raw)
	record(res, err)
	if err != nil {
		st := toStatus(err)
		logAt(0, "hook chain failed", "code", st.Code().String(), "error", err.Error(), "duration", time.Since(start).String())
		return "", false, st.Err()
	}
	logged := m.opts.Log.Enabled() // the fields of the line below are built only when it is written
	if res.Patch == nil {
		if logged {
			logAt(0, "mutated", "hooks", res.Hooks, "patchOperations", 0, "duration", time.Since(start).String())
		}
		return "", false, nil
	}
	encoded, err := res.Answer() // the chain's own answer: the object is not decoded again here
	if err != nil {
		return "", false, status.Errorf(codes.Internal, "%s %s: encode the answer: %v", hookType, gvk.Kind, err)
	}
	if logged {
		logAt(0, "mutated", "hooks", res.Hooks, "patchOperations", res.Operations, "duration", time.Since(start).String())
	}
	return unsafe.String(unsafe.SliceData(encoded), len(encoded)), true, nil
}

// StatusCode returns the gRPC code Mutate answers for an error of engine.Runner.Mutate:
//
//	InvalidArgument     400  the object is not valid JSON for its kind (failure.DecodeError), or
//	                         is of another kind or has repeated or case-variant keys
//	                         (intake.InputError inside the DecodeError)
//	PermissionDenied    403  a hook refused the object (returned an error)
//	FailedPrecondition  422  a hook changed apiVersion, kind, name, namespace or uid
//	Internal            500  a hook panicked or returned another kind of object
//	DeadlineExceeded    504  a hook was still running at the deadline
//	Canceled                 the caller went away while a hook was running
//	ResourceExhausted   429  too many chains running (failure.ErrOverloaded); no hook ran
//
// A hook that returns a Kubernetes API status error gets the code of its HTTP status
// (401 Unauthenticated, 404 NotFound, 409 Aborted, 429 ResourceExhausted, 503 Unavailable,
// other 4xx FailedPrecondition, other 5xx Internal). Errors that are none of these are
// Internal.
func StatusCode(err error) codes.Code {
	kind, apiCode := failure.Classify(err)
	switch kind {
	case failure.NoFailure:
		return codes.OK
	case failure.Invalid:
		return codes.InvalidArgument
	case failure.Protected:
		return codes.FailedPrecondition
	case failure.Overloaded:
		return codes.ResourceExhausted
	case failure.Canceled:
		return codes.Canceled
	case failure.Deadline:
		return codes.DeadlineExceeded
	case failure.Refused:
		return codes.PermissionDenied
	case failure.APIStatus:
		return apiStatusCode(apiCode)
	default: // Crashed, Internal
		return codes.Internal
	}
}

// apiStatusCode maps the HTTP code of a Kubernetes API status error a hook returned.
func apiStatusCode(code int32) codes.Code {
	switch code {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.Aborted
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	}
	if code >= 400 && code < 500 {
		return codes.FailedPrecondition // 422 and the rest: the request cannot be done as it is
	}
	return codes.Internal
}

// toStatus turns an error of Run into a gRPC status whose message is the error's text, which
// names the hook, hook type and kind.
func toStatus(err error) *status.Status {
	return status.New(StatusCode(err), fmt.Sprintf("synchook: %v", err))
}
