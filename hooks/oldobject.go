package hooks

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
)

// ErrMalformedOldObject is wrapped by the errors about an old object that is not a JSON object
// of the call's kind or does not decode into it (the engine's intake check, DecodeOldObject):
// the request is malformed. Whichever hook's error wraps it, the transports answer as for a
// malformed object (webhook: 400; gRPC: InvalidArgument).
var ErrMalformedOldObject = errors.New("malformed old object")

// oldObjectKey is the context key of the old object.
type oldObjectKey struct{}

// WithOldObject returns a copy of ctx that carries raw, the JSON of the old object, for
// OldObject and DecodeOldObject; an empty raw returns ctx as it is. synchook's engine calls it
// for the hooks of a request that has an old object (after checking it is a JSON object of the
// request's kind); a hook's unit test calls it to give one. raw is kept, not copied: it must
// not change while ctx is in use. OldObject gives it with its capacity cut to its length, so
// that an append to it copies instead of writing past its end (into the rest of a request body
// it was cut from).
func WithOldObject(ctx context.Context, raw []byte) context.Context {
	if len(raw) == 0 {
		return ctx
	}
	return context.WithValue(ctx, oldObjectKey{}, raw[:len(raw):len(raw)])
}

// OldObject returns the JSON of the object that the object of an Update* call replaces and
// true; nil and false when the call has none.
//
// kube-apiserver sends a mutating admission webhook the object an UPDATE replaces (the stored
// object, request.oldObject); vcluster's plugin protocols send no such thing. So only when
// synchook serves admission do the hooks of an Update* call of an UPDATE request have an old
// object; every call under vcluster, and Create*, Delete* and Get* calls on any transport, have
// none. The old object is the caller's input as much as the object is, and on the admission
// path a tenant's: read it and compare with it; never take it for the object's identity or
// trust it more than the object. synchook's engine never patches it, and its guard checks the
// identity of the object only.
//
// The bytes are the request's own, not a copy: read them, never change them. The engine checked
// them as it checks the object (a JSON object, its apiVersion and kind, when present, those of
// the call, no repeated or case-variant keys at its top level or in its metadata), nothing
// more: see DecodeOldObject.
func OldObject(ctx context.Context) ([]byte, bool) {
	raw, ok := ctx.Value(oldObjectKey{}).([]byte)
	return raw, ok
}

// DecodeOldObject decodes the old object (OldObject) into into, a new empty object of the kind
// of the call, of the Go type the hook's object has (e.g. &corev1.Pod{}, or an
// *unstructured.Unstructured whose apiVersion and kind are kept when the JSON has none), the
// way synchook decodes the object (the Kubernetes JSON serializer's rules: case-sensitive
// names, unknown fields ignored, integers in interface values as int64). It decodes again on
// every call: into is the caller's own. It returns false and nil when the call has no old
// object, and an error wrapping ErrMalformedOldObject when the JSON does not decode into into.
// apiVersion and kind are as the JSON has them; they may be empty.
func DecodeOldObject(ctx context.Context, into client.Object) (bool, error) {
	raw, ok := OldObject(ctx)
	if !ok {
		return false, nil
	}
	if err := decodeOld(raw, into); err != nil {
		return true, fmt.Errorf("%w: %w", ErrMalformedOldObject, err)
	}
	return true, nil
}

// decodeOld decodes raw, which must be a JSON object, into into.
func decodeOld(raw []byte, into client.Object) error {
	i := 0
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	if i == len(raw) || raw[i] != '{' {
		return errors.New("not a JSON object")
	}
	if u, ok := into.(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		var m map[string]any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil {
			return err
		}
		u.Object = m
		if u.GetKind() == "" && u.GetAPIVersion() == "" {
			u.SetGroupVersionKind(gvk)
		}
		return nil
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(raw, into)
}
