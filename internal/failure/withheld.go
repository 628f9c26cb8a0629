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
