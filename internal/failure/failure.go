// Package failure is what a request's failure is: the errors the engine returns (HookError,
// PanicError, DecodeError, ErrWrongKind, ErrOverloaded), their kind for the transports
// (Classify: each transport maps a Failure to its own codes), and the Secret-safe stand-in for a
// hook's text (FromHook, WithheldError). In: an error of a hook call or of a request; out: the
// error as it may leave synchook. It runs nothing and speaks no transport.
package failure

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// ErrOverloaded is returned by Runner.Mutate when RunnerOptions.MaxConcurrent chains are
// already running; transports answer it with 429 (HTTP) or ResourceExhausted (gRPC). The
// request did not run any hook.
var ErrOverloaded = errors.New("too many hook chains running; retry later")

// HookError is returned by Mutate when a hook fails: it returned an error, panicked, outlived the
// request deadline, returned an object of another kind, or changed a protected field.
type HookError struct {
	// Hook is the name of the hook, Type its hook type and GVK the kind of the object.
	Hook string
	Type hooks.HookType
	GVK  schema.GroupVersionKind
	// Err is the cause: the hook's own error, a *PanicError, context.DeadlineExceeded (or
	// Canceled), ErrWrongKind or a *patch.ForbiddenPathError. For a Secret or SecretList, a
	// *WithheldError stands in for the hook's own error and panic.
	Err error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("hook %q %s %s: %v", e.Hook, e.Type, e.GVK.Kind, e.Err)
}

func (e *HookError) Unwrap() error { return e.Err }

// PanicError is the cause of a HookError when the hook panicked. Value is the panic value as
// text; Stack is the goroutine stack, for logs only (never sent to callers).
type PanicError struct {
	Value string
	Stack []byte
}

func (e *PanicError) Error() string { return "panic: " + e.Value }

// ErrWrongKind is the cause of a HookError when a hook returns nil or an object of another Go
// type or GVK than it was given.
var ErrWrongKind = errors.New("hook returned a different kind of object")

// DecodeError is returned by Mutate when the request object (or its old object: Old) is not
// valid JSON for its GVK, or (Err an *InputError) is of another kind or has keys that readers
// could take differently.
type DecodeError struct {
	GVK schema.GroupVersionKind
	// Old says the error is about the request's old object (MutateOptions.OldObject), not its
	// object; errors.Is then finds hooks.ErrMalformedOldObject.
	Old bool
	Err error
}

func (e *DecodeError) Error() string {
	what := "object"
	if e.Old {
		what = "old object"
	}
	return fmt.Sprintf("decode %s %s: %v", e.GVK.Kind, what, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Is reports whether target is hooks.ErrMalformedOldObject and e is about the old object.
func (e *DecodeError) Is(target error) bool {
	return e.Old && target == hooks.ErrMalformedOldObject //nolint:errorlint // a sentinel, compared as errors.Is does
}

// Failure is what kind of failure an error of Runner.Mutate is, for transports, which each map
// it to their own codes (webhook: HTTP statuses, internal/bridge: gRPC codes); it carries no
// code of any protocol.
type Failure int

// The kinds of Failure, in the order Classify checks them.
const (
	// NoFailure: the error is nil.
	NoFailure Failure = iota
	// Invalid: the object (or the old object) is not valid JSON for its kind, or ambiguous
	// (*DecodeError, hooks.ErrMalformedOldObject).
	Invalid
	// Protected: a hook changed apiVersion, kind, name, namespace or uid, or its change's undo
	// was too large or would hold a Secret value without a key (patch.ErrForbiddenPath,
	// undo.ErrTooLarge, undo.ErrNeedsKey).
	Protected
	// Overloaded: every concurrency slot was busy; no hook ran (ErrOverloaded).
	Overloaded
	// Canceled: the caller went away while a hook ran (context.Canceled).
	Canceled
	// Deadline: a hook was still running at the deadline (context.DeadlineExceeded).
	Deadline
	// Crashed: a hook panicked or returned another kind of object (*PanicError, ErrWrongKind).
	Crashed
	// APIStatus: a hook returned a Kubernetes API status error; Classify also returns its code.
	APIStatus
	// Refused: a hook returned any other error: it refused the object.
	Refused
	// Internal: an error that is none of the above (not a hook's: synchook's own).
	Internal
)

// Classify returns the Failure of an error of Runner.Mutate and, for APIStatus, the HTTP
// status code of the Kubernetes status error a hook returned (0 otherwise).
func Classify(err error) (Failure, int32) {
	if err == nil { // before the targets below, which escape to the heap
		return NoFailure, 0
	}
	var (
		decodeErr *DecodeError
		hookErr   *HookError
		panicErr  *PanicError
		apiStatus apierrors.APIStatus
	)
	switch {
	case errors.As(err, &decodeErr), errors.Is(err, hooks.ErrMalformedOldObject):
		return Invalid, 0
	case errors.Is(err, patch.ErrForbiddenPath), errors.Is(err, undo.ErrTooLarge), errors.Is(err, undo.ErrNeedsKey):
		return Protected, 0
	case errors.Is(err, ErrOverloaded):
		return Overloaded, 0
	case errors.Is(err, context.Canceled):
		return Canceled, 0
	case errors.Is(err, context.DeadlineExceeded):
		return Deadline, 0
	case errors.As(err, &panicErr), errors.Is(err, ErrWrongKind):
		return Crashed, 0
	case errors.As(err, &apiStatus) && apiStatus.Status().Code != 0:
		return APIStatus, apiStatus.Status().Code
	case errors.As(err, &hookErr):
		return Refused, 0
	default:
		return Internal, 0
	}
}
