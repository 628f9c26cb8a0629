// Package failure is what a request's failure is: the errors the engine returns (HookError,
// PanicError, DecodeError, ErrWrongKind, ErrOverloaded), their kind for the transports
// (Classify: each transport maps a Failure to its own codes), and the Secret-safe stand-in for a
// hook's text (FromHook, WithheldError). In: an error of a hook call or of a request; out: the
// error as it may leave synchook. It runs nothing and speaks no transport.
package failure

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// ErrOverloaded is returned by engine.Runner.Mutate when RunnerOptions.MaxConcurrent chains
// are already running; transports answer it with 429 (HTTP) or ResourceExhausted (gRPC). The
// request did not run any hook.
var ErrOverloaded = errors.New("too many hook chains running; retry later")

// HookError is returned by engine.Runner.Mutate when a hook fails: it returned an error,
// panicked, outlived the request deadline, returned an object of another kind, or changed a
// protected field.
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

// DecodeError is returned by engine.Runner.Mutate when the request object (or its old object:
// Old) is not valid JSON for its GVK, or (Err an *intake.InputError) is of another kind or has
// keys that readers could take differently.
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

// Failure is what kind of failure an error of engine.Runner.Mutate is, for transports, which each map
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

// Classify returns the Failure of an error of engine.Runner.Mutate and, for APIStatus, the HTTP
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

// Errors of hooks on Secrets.
//
// A hook that fails on a Secret can put the Secret's values into its error or panic value in
// any encoding: as they are, base64, hex, Go-quoted (%q), as decimal bytes (%v of a []byte), or
// inside a printed *corev1.Secret. No scrubbing can know every encoding, so for a Secret (and a
// SecretList) synchook lets none of the hook's text out: the error names the hook, its type and
// kind (*HookError), says whether the hook failed or panicked, and carries a *WithheldError
// whose message is fixed text plus a detail, a keyed hash of the hook's message (see
// WithheldError.Detail). The hook's error and panic value, and the panic's stack, are dropped
// at once, before the Observer (metrics), the transports' responses and logs, or capture see
// them.

// DetailDigits is the number of hex digits of WithheldError.Detail.
const DetailDigits = 16

// detailKey is the HMAC key of WithheldError.Detail: random, made once per process and never
// written anywhere, so that a detail cannot be used to guess the message it was made from.
var detailKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (it crashes the program instead)
	return k
}()

// isSecret reports whether gvk is a core v1 Secret or SecretList: their hooks' messages are
// withheld.
func isSecret(gvk schema.GroupVersionKind) bool {
	return gvk.Group == "" && gvk.Version == "v1" && (gvk.Kind == "Secret" || gvk.Kind == "SecretList")
}

// WithheldError is the cause of a HookError in place of the error or panic of a hook that
// failed on a Secret or SecretList: its message is fixed text that holds nothing of the hook's
// text. It keeps what the transports map to a status code: errors.Is and errors.As see
// context.DeadlineExceeded, context.Canceled, ErrWrongKind, undo.ErrTooLarge, ErrOverloaded,
// patch.ErrForbiddenPath and hooks.ErrMalformedOldObject when the hook's error wrapped them, a
// *PanicError (whose Value is "withheld" and which has no Stack) when the hook panicked, a
// *DecodeError when the hook returned one, and an *apierrors.StatusError with the code (not
// the message) of a Kubernetes API status error the hook returned, so hooks.StatusCode gives
// the same code as for the hook's own error.
type WithheldError struct {
	// Panicked says the hook panicked (else it returned an error).
	Panicked bool
	// Detail is the first DetailDigits hex digits of the HMAC-SHA256 of the hook's message
	// under a key made at random by each process and stored nowhere: two failures with the
	// same message give the same detail in one process, so operators can tell repeats of one
	// failure apart from different ones, but the detail reveals nothing of the message and
	// does not match across processes or restarts.
	Detail string

	kinds  []string // what the hook's error was known to be, for the message
	causes []error
}

// Error returns "the hook failed on a Secret; its message is withheld (detail <Detail>)", or
// "the hook panicked on a Secret; its panic value is withheld (…)", with what the error was
// known to be (e.g. "context deadline exceeded") in brackets after "Secret".
func (e *WithheldError) Error() string {
	var b strings.Builder
	if e.Panicked {
		b.WriteString("the hook panicked on a Secret")
	} else {
		b.WriteString("the hook failed on a Secret")
	}
	if len(e.kinds) > 0 {
		b.WriteString(" (" + strings.Join(e.kinds, "; ") + ")")
	}
	if e.Panicked {
		b.WriteString("; its panic value is withheld (detail " + e.Detail + ")")
	} else {
		b.WriteString("; its message is withheld (detail " + e.Detail + ")")
	}
	return b.String()
}

// Unwrap returns the stand-ins of what the hook's error was known to be (see WithheldError).
func (e *WithheldError) Unwrap() []error { return e.causes }

// withheldValue is PanicError.Value of a panic on a Secret.
const withheldValue = "withheld"

// FromHook returns the error of a hook call on an object of kind gvk as it may leave
// synchook: err itself, or for a Secret or SecretList a *WithheldError made from it (nil stays
// nil). Every error or panic that comes from a hook's code passes through it, before anything
// else sees it.
func FromHook(gvk schema.GroupVersionKind, err error) error {
	if err == nil || !isSecret(gvk) {
		return err
	}
	return withhold(gvk, err)
}

// sentinels are the errors that keep their identity through withhold, with the text they add
// to the message (synchook's own text, never the hook's).
var sentinels = []error{context.DeadlineExceeded, context.Canceled, ErrWrongKind, undo.ErrTooLarge, ErrOverloaded, patch.ErrForbiddenPath, hooks.ErrMalformedOldObject}

// withhold returns the *WithheldError of err, a hook's error or panic on an object of kind gvk.
func withhold(gvk schema.GroupVersionKind, err error) *WithheldError {
	w := &WithheldError{Detail: detailOf(err)}
	var pe *PanicError
	if errors.As(err, &pe) {
		w.Panicked = true
		w.causes = append(w.causes, &PanicError{Value: withheldValue})
	}
	var de *DecodeError
	if errors.As(err, &de) {
		w.causes = append(w.causes, &DecodeError{GVK: gvk, Err: errors.New(withheldValue)})
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			w.causes = append(w.causes, s)
			w.kinds = append(w.kinds, s.Error())
		}
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if code := st.Status().Code; code != 0 {
			w.causes = append(w.causes, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: code, Reason: knownReason(st.Status().Reason),
				Message: "withheld",
			}})
			w.kinds = append(w.kinds, fmt.Sprintf("status %d", code))
		}
	}
	return w
}

// detailOf returns WithheldError.Detail for err. A hook's Error method that panics gives a
// detail too.
func detailOf(err error) (detail string) {
	defer func() {
		if recover() != nil {
			detail = "unavailable"
		}
	}()
	mac := hmac.New(sha256.New, detailKey)
	mac.Write([]byte(err.Error()))
	return hex.EncodeToString(mac.Sum(nil))[:DetailDigits]
}

// knownReason returns r when it is one of the reasons apimachinery defines, else
// StatusReasonUnknown: a hook can put any text into a status's reason.
func knownReason(r metav1.StatusReason) metav1.StatusReason {
	switch r {
	case metav1.StatusReasonUnauthorized, metav1.StatusReasonForbidden, metav1.StatusReasonNotFound,
		metav1.StatusReasonAlreadyExists, metav1.StatusReasonConflict, metav1.StatusReasonGone,
		metav1.StatusReasonInvalid, metav1.StatusReasonServerTimeout, metav1.StatusReasonStoreReadError,
		metav1.StatusReasonTimeout, metav1.StatusReasonTooManyRequests, metav1.StatusReasonBadRequest,
		metav1.StatusReasonMethodNotAllowed, metav1.StatusReasonNotAcceptable,
		metav1.StatusReasonRequestEntityTooLarge, metav1.StatusReasonUnsupportedMediaType,
		metav1.StatusReasonInternalError, metav1.StatusReasonExpired, metav1.StatusReasonServiceUnavailable:
		return r
	}
	return metav1.StatusReasonUnknown
}
