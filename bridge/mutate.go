package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/bridge/remote"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/metrics"
)

// Mutate implements remote.PluginServer: it runs the hook chain of (apiVersion, kind, type) on
// the object, exactly as POST /mutate/{type} does, and answers
//
//	mutated=false, no object  no hook for (apiVersion, kind, type), a type this project does not
//	                          implement (e.g. ApplyPhysical), or hooks that changed nothing
//	mutated=true, object      the whole hooked object, encoded by Answer so that vcluster's
//	                          json.Unmarshal into its existing object gives exactly that object
//	gRPC error                see StatusCode; the message names the hook, type and kind
func (b *Bridge) Mutate(ctx context.Context, req *remote.MutateRequest) (*remote.MutateResult, error) {
	start := time.Now()
	logAt := func(v int, msg string, kv ...any) { // fields are built only when the line is written
		if l := b.opts.Log.V(v); l.Enabled() {
			l.Info(msg, append([]any{"hookType", req.GetType(), "apiVersion", req.GetApiVersion(), "kind", req.GetKind()}, kv...)...)
		}
	}
	hookType, err := hooks.ParseHookType(req.GetType())
	if err != nil {
		logAt(1, "hook type not implemented, answering unchanged")
		return &remote.MutateResult{}, nil
	}
	gv, err := schema.ParseGroupVersion(req.GetApiVersion())
	if err != nil || req.GetKind() == "" || gv.Version == "" {
		return nil, status.Errorf(codes.InvalidArgument, "apiVersion %q kind %q: not a resource kind", req.GetApiVersion(), req.GetKind())
	}
	gvk := gv.WithKind(req.GetKind())
	if !b.reg.Has(gvk, hookType) {
		logAt(1, "no hooks, answering unchanged")
		return &remote.MutateResult{}, nil
	}

	// GracefulStop lets this call finish; only vcluster's deadline and ours apply.
	ctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	defer cancel()
	raw := []byte(req.GetObject())
	record := func(hooks.Result, error) {}
	if m := b.opts.Metrics; m != nil {
		record = m.Start(metrics.TransportGRPC, hookType, gvk, start)
	}
	res, err := b.reg.Run(ctx, gvk, hookType, raw)
	record(res, err)
	if err != nil {
		st := toStatus(err)
		logAt(0, "hook chain failed", "code", st.Code().String(), "error", err.Error(), "duration", time.Since(start).String())
		return nil, st.Err()
	}
	if res.Patch == nil {
		logAt(0, "mutated", "hooks", res.Hooks, "patchOperations", 0, "duration", time.Since(start).String())
		return &remote.MutateResult{}, nil
	}
	hooked, err := res.Object()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s %s: apply the hooks' patch: %v", hookType, gvk.Kind, err)
	}
	answer, err := Answer(b.objects[gvk], raw, hooked)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s %s: encode the answer: %v", hookType, gvk.Kind, err)
	}
	logAt(0, "mutated", "hooks", res.Hooks, "patchOperations", res.Operations, "duration", time.Since(start).String())
	return &remote.MutateResult{Object: string(answer), Mutated: true}, nil
}

// StatusCode returns the gRPC code Mutate answers for an error of hooks.Registry.Run:
//
//	InvalidArgument     400  the object is not valid JSON for its kind (hooks.DecodeError)
//	PermissionDenied    403  a hook refused the object (returned an error)
//	FailedPrecondition  422  a hook changed apiVersion, kind, name, namespace or uid
//	Internal            500  a hook panicked or returned another kind of object
//	DeadlineExceeded    504  a hook was still running at the deadline
//	Canceled                 the caller went away while a hook was running
//	ResourceExhausted   429  too many chains running (hooks.ErrOverloaded); no hook ran
//
// A hook that returns a Kubernetes API status error gets the code of its HTTP status
// (401 Unauthenticated, 404 NotFound, 409 Aborted, 429 ResourceExhausted, 503 Unavailable,
// other 4xx FailedPrecondition, other 5xx Internal). Errors that are none of these are
// Internal.
func StatusCode(err error) codes.Code {
	var hookErr *hooks.HookError
	var decodeErr *hooks.DecodeError
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, hooks.ErrOverloaded):
		return codes.ResourceExhausted
	case !errors.As(err, &hookErr) && !errors.As(err, &decodeErr):
		return codes.Internal
	}
	switch code := hooks.StatusCode(err); code {
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
	default:
		if code >= 400 && code < 500 {
			return codes.FailedPrecondition // 422 and the rest: the request cannot be done as it is
		}
		return codes.Internal
	}
}

// toStatus turns an error of Run into a gRPC status whose message is the error's text, which
// names the hook, hook type and kind.
func toStatus(err error) *status.Status {
	return status.New(StatusCode(err), fmt.Sprintf("synchook: %v", err))
}
