package hooks

import (
	"encoding/base64"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// minRedactLen is the shortest Secret value that is scrubbed from messages; shorter values
// would mangle ordinary words.
const minRedactLen = 4

// Redacted is what a Secret value is replaced with in error messages.
const Redacted = "[redacted]"

// secretValues returns the texts of a Secret's data (decoded and base64) and stringData, to be
// scrubbed from error messages; nil for any other object.
func secretValues(obj client.Object) []string {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return nil
	}
	var out []string
	add := func(v string) {
		if len(v) >= minRedactLen {
			out = append(out, v)
		}
	}
	for _, v := range s.Data {
		add(string(v))
		add(base64.StdEncoding.EncodeToString(v))
	}
	for _, v := range s.StringData {
		add(v)
	}
	return out
}

// redactError returns err with every value scrubbed from its message (and from the value of a
// *PanicError inside it); errors.Is and errors.As still see the original chain.
func redactError(err error, values []string) error {
	if err == nil || len(values) == 0 {
		return err
	}
	var pe *PanicError
	if errors.As(err, &pe) {
		pe.Value = scrub(pe.Value, values)
		pe.Stack = nil
	}
	msg := err.Error()
	if clean := scrub(msg, values); clean != msg {
		return &redactedError{msg: clean, cause: err}
	}
	return err
}

func scrub(s string, values []string) string {
	for _, v := range values {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	return s
}

type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }
