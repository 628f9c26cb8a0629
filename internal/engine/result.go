package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/answer"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// Result is the outcome of one chain run.
type Result struct {
	// Patch is the RFC 6902 JSON Patch (a JSON array) that turns the request object into the
	// hooked object; nil when no hook changed anything or no hook is registered.
	Patch []byte
	// Operations is the number of operations in Patch.
	Operations int
	// Hooks is the number of hooks that ran.
	Hooks int

	raw []byte
	ops []patch.Operation
	// doc is the request's object as the chain edited it, when it kept one (an undo read);
	// goType the Go type of the kind, which answer.Of encodes along.
	doc    *jsondoc.Doc
	goType reflect.Type
	// rec is the request object's record (intake.go; nil: none), for the loop detector.
	rec *record
}

// Answer returns the JSON that answers a vcluster plugin's Mutate: decoded with encoding/json's
// Unmarshal INTO the object the request was decoded from (the way vcluster reads it), and also
// into a new one, it gives exactly the hooked object (package answer). nil when nothing changed.
// It is the request's bytes with the chain's edits: spliced into them where the edits add or
// remove members or replace scalars (answer.Splice), else encoded along the kind's Go type
// (answer.Of). Errors: an edit that does not apply (a bug) or a value that does not encode.
func (r Result) Answer() ([]byte, error) {
	if r.Patch == nil {
		return nil, nil
	}
	if r.doc != nil {
		return answer.Of(r.goType, r.doc)
	}
	return answer.Splice(r.goType, r.raw, r.rec.topLevel(), r.ops)
}

// Object returns the request object with Patch applied: the request bytes themselves when
// nothing changed, else those bytes with the chain's edits (computed on each call; the
// admission transport never needs it).
func (r Result) Object() ([]byte, error) {
	if r.Patch == nil {
		return r.raw, nil
	}
	doc, err := r.edited()
	if err != nil {
		return nil, err
	}
	return doc.Bytes()
}

// edited returns the request's object with the chain's edits: the chain's own Doc, else a Doc
// of the request with the operations applied.
func (r Result) edited() (*jsondoc.Doc, error) {
	if r.doc != nil {
		return r.doc, nil
	}
	doc := jsondoc.New(r.raw)
	if err := doc.ApplyOps(r.ops); err != nil {
		return nil, fmt.Errorf("apply the hooks' patch: %w", err)
	}
	return doc, nil
}

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
