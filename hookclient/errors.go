package hookclient

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
)

// Errors wrapped by every *Error, for errors.Is.
var (
	// ErrDenied means the sidecar answered allowed: false: a hook refused the object, or the
	// request was malformed. It is returned under both failure policies.
	ErrDenied = errors.New("denied by the sidecar")
	// ErrUnavailable means the sidecar could not be reached or failed at the transport level:
	// connection refused, TLS failure, timeout, an HTTP status other than 200, or a response
	// that is not a valid AdmissionReview or whose patch does not apply. Under Ignore the call
	// goes on unmutated instead of returning it.
	ErrUnavailable = errors.New("sidecar unavailable")
	// ErrUnsupported means the operation cannot run hooks (server-side Apply, DeleteAllOf) and
	// the kind has hooks of that kind, so it was not sent to the API server.
	ErrUnsupported = errors.New("operation not supported on a hooked kind")
)

// Error is returned by every hook call that fails: it says which hook type, GVK and object
// failed, and wraps the cause (ErrDenied, ErrUnavailable or ErrUnsupported, with details).
type Error struct {
	// Type is the hook type of the call.
	Type hooks.HookType
	// GVK is the kind of the object (the list kind for a list).
	GVK schema.GroupVersionKind
	// Object names the object: "namespace/name", "name", or "<n> items" for a list.
	Object string
	// Code is the status code the sidecar answered with: the admission status code of a
	// denial (403 a hook refused, 422 a protected field, 504 deadline, …) or the HTTP status
	// of a failed request; 0 when there was no answer.
	Code int32
	// Err is the cause.
	Err error
}

// Error returns "<hook type> <apiVersion> <kind> <object>: <cause>".
func (e *Error) Error() string {
	apiVersion, kind := e.GVK.ToAPIVersionAndKind()
	return fmt.Sprintf("%s %s %s %s: %v", e.Type, apiVersion, kind, e.Object, e.Err)
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// objectRef is how errors and logs name an object.
func objectRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
