package canary

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/patch"
)

// LeakLabel is the label of a canary Secret that tells Hook which of Leaks to commit.
const LeakLabel = "canary.synchook.io/leak"

// Leak is one way a hook can put a Secret's value into its failure.
type Leak struct {
	// Name says what the hook does, as a sentence for t.Run.
	Name string
	// Fail returns the hook's error for s, or panics.
	Fail func(s *corev1.Secret) error
}

func password(s *corev1.Secret) []byte { return s.Data["password"] }

// Leaks are the ways a hook leaks a Secret's value that the tests try: every encoding of the
// value that fmt gives, the whole Secret printed, panics, and errors whose kind a transport
// maps to a status code (a Kubernetes status error, a deadline, a wrong kind, a protected
// path), each with the value in its text.
var Leaks = []Leak{
	{"an error prints the value's bytes with %v", func(s *corev1.Secret) error {
		return fmt.Errorf("password %v is too weak", password(s))
	}},
	{"an error prints the value with %q", func(s *corev1.Secret) error {
		return fmt.Errorf("password %q is too weak", password(s))
	}},
	{"an error prints the value with %x", func(s *corev1.Secret) error {
		return fmt.Errorf("password %x is too weak", password(s))
	}},
	{"an error prints the value with %X", func(s *corev1.Secret) error {
		return fmt.Errorf("password %X is too weak", password(s))
	}},
	{"an error prints the value's bytes with %#v", func(s *corev1.Secret) error {
		return fmt.Errorf("password %#v is too weak", password(s))
	}},
	{"an error prints the value in base64 with %s", func(s *corev1.Secret) error {
		return fmt.Errorf("password %s is too weak", base64.StdEncoding.EncodeToString(password(s)))
	}},
	{"an error prints the stringData value with %s", func(s *corev1.Secret) error {
		return fmt.Errorf("note %s is not allowed", s.StringData["note"])
	}},
	{"an error prints the whole Secret with %v", func(s *corev1.Secret) error {
		return fmt.Errorf("cannot sync %v", s)
	}},
	{"an error prints the whole Secret with %+v", func(s *corev1.Secret) error {
		return fmt.Errorf("cannot sync %+v", s)
	}},
	{"an error prints the whole Secret with %#v", func(s *corev1.Secret) error {
		return fmt.Errorf("cannot sync %#v", s)
	}},
	{"the hook panics with the whole Secret", func(s *corev1.Secret) error {
		panic(s)
	}},
	{"the hook panics with the value quoted", func(s *corev1.Secret) error {
		panic(fmt.Sprintf("unexpected password %q", password(s)))
	}},
	{"the hook panics with an error that prints the value's bytes", func(s *corev1.Secret) error {
		panic(fmt.Errorf("unexpected password %v", password(s)))
	}},
	{"the hook returns a Kubernetes NotFound named after the value", func(s *corev1.Secret) error {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, string(password(s)))
	}},
	{"the hook returns a Kubernetes status error whose reason is the value", func(s *corev1.Secret) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReason(password(s)), Message: string(password(s)),
		}}
	}},
	{"an error wraps the deadline and quotes the value", func(s *corev1.Secret) error {
		return fmt.Errorf("lookup of %q: %w", password(s), context.DeadlineExceeded)
	}},
	{"an error wraps ErrWrongKind and quotes the value", func(s *corev1.Secret) error {
		return fmt.Errorf("%w: %q", failure.ErrWrongKind, password(s))
	}},
	{"an error is a protected-path error whose path holds the value", func(s *corev1.Secret) error {
		return &patch.ForbiddenPathError{Hook: "leaky", Op: "replace", Path: "/metadata/name/" + string(password(s)), Field: "/metadata/name"}
	}},
}

// Cause returns the cause that the hook's failure on s would have in a *failure.HookError if
// nothing were withheld: Fail's error, or a *failure.PanicError of its panic. Tests give it to
// webhook.StatusCode (or a transport's own mapping) to know which status the withheld error
// must still give.
func (l Leak) Cause(s *corev1.Secret) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &failure.PanicError{Value: fmt.Sprint(v)}
		}
	}()
	return l.Fail(s.DeepCopy())
}

// Panics reports whether the leak is a panic.
func (l Leak) Panics(s *corev1.Secret) bool {
	var pe *failure.PanicError
	return errors.As(l.Cause(s), &pe)
}

// Hook returns a hook named name on v1 Secrets for types that commits Leaks[i] on a Secret
// labelled LeakLabel=i (see Secret) and leaves any other Secret as it is.
func Hook(name string, types ...hooks.HookType) hooks.ClientHook {
	return hooks.NewFunc(name, &corev1.Secret{}, types, func(_ context.Context, o client.Object) (client.Object, error) {
		s := o.(*corev1.Secret)
		i, err := strconv.Atoi(s.Labels[LeakLabel])
		if err != nil || i < 0 || i >= len(Leaks) {
			return o, nil
		}
		if err := Leaks[i].Fail(s); err != nil {
			return nil, err
		}
		return o, nil
	})
}

// Secret returns the v1 Secret tenant/db that holds Value in data ("password") and stringData
// ("note"), and a kubectl last-applied-configuration annotation that holds both, labelled
// LeakLabel=leak (no label when leak < 0).
func Secret(leak int) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "tenant", Labels: map[string]string{"app": "db"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte(Value)},
		StringData: map[string]string{"note": Value},
	}
	applied, _ := json.Marshal(s)
	s.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: string(applied)}
	if leak >= 0 {
		s.Labels[LeakLabel] = strconv.Itoa(leak)
	}
	return s
}

// SecretJSON is the JSON of Secret(leak).
func SecretJSON(leak int) []byte {
	b, err := json.Marshal(Secret(leak))
	if err != nil {
		panic(err)
	}
	return b
}
