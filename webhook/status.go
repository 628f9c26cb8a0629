package webhook

import (
	"net/http"

	"github.com/synchook/synchook/internal/failure"
)

// StatusCode returns the HTTP status code of an AdmissionReview answer (response.status.code)
// for an error of engine.Runner.Mutate:
//
//	400  the object is not valid JSON for its kind, or is ambiguous (another kind, repeated or
//	     case-variant keys)
//	403  a hook refused the object (returned an error)
//	422  a hook changed apiVersion, kind, name, namespace or uid, or its undo is too large
//	429  too many chains running; no hook ran
//	500  a hook panicked or returned another kind of object; or synchook's own error
//	504  a hook was still running at the deadline, or the caller went away
//
// A hook that returns a Kubernetes API status error gets that error's code.
func StatusCode(err error) int32 {
	kind, apiCode := failure.Classify(err)
	switch kind {
	case failure.NoFailure:
		return http.StatusOK
	case failure.Invalid:
		return http.StatusBadRequest
	case failure.Protected:
		return http.StatusUnprocessableEntity
	case failure.Overloaded:
		return http.StatusTooManyRequests
	case failure.Canceled, failure.Deadline:
		return http.StatusGatewayTimeout
	case failure.APIStatus:
		return apiCode
	case failure.Refused:
		return http.StatusForbidden
	default: // Crashed, Internal
		return http.StatusInternalServerError
	}
}
