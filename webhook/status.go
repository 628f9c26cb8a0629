package webhook

import (
	"net/http"

	"github.com/synchook/synchook/internal/engine"
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
	failure, apiCode := engine.Classify(err)
	switch failure {
	case engine.NoFailure:
		return http.StatusOK
	case engine.Invalid:
		return http.StatusBadRequest
	case engine.Protected:
		return http.StatusUnprocessableEntity
	case engine.Overloaded:
		return http.StatusTooManyRequests
	case engine.Canceled, engine.Deadline:
		return http.StatusGatewayTimeout
	case engine.APIStatus:
		return apiCode
	case engine.Refused:
		return http.StatusForbidden
	default: // Crashed, Internal
		return http.StatusInternalServerError
	}
}
