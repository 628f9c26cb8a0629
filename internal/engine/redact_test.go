package engine_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/canary"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/webhook"
)

var (
	secretGVK     = corev1.SchemeGroupVersion.WithKind("Secret")
	secretListGVK = corev1.SchemeGroupVersion.WithKind("SecretList")
)

// errorsObserver keeps the text of every error the Observer is given.
type errorsObserver struct {
	mu   sync.Mutex
	errs []error
}

func (o *errorsObserver) ObserveHook(_ string, _ hooks.HookType, _ schema.GroupVersionKind, _ time.Duration, err error) {
	if err != nil {
		o.mu.Lock()
		o.errs = append(o.errs, err)
		o.mu.Unlock()
	}
}

func (o *errorsObserver) take() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	errs := o.errs
	o.errs = nil
	return errs
}

// errorTexts returns every text the error tree of err can show: each node's message, %v, %+v
// and %#v, and a panic's value and stack.
func errorTexts(err error) string {
	var b strings.Builder
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		fmt.Fprintf(&b, "%s\n%v\n%+v\n%#v\n", e.Error(), e, e, e)
		if pe, ok := e.(*failure.PanicError); ok { //nolint:errorlint // the walk visits every layer itself
			b.WriteString(pe.Value + "\n")
			b.Write(pe.Stack)
		}
		switch u := e.(type) { //nolint:errorlint // unwrapping by hand, one layer at a time
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return b.String()
}

var detailText = regexp.MustCompile(`\(detail ([0-9a-f]{16})\)$`)

func TestAHookFailingOnASecretLeavesNoValueInAnyEncoding(t *testing.T) {
	obs := &errorsObserver{}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(canary.Hook("leaky", hooks.UpdatePhysical))
	r := engine.NewRunner(reg, engine.RunnerOptions{Observer: obs})
	for i, leak := range canary.Leaks {
		t.Run(leak.Name, func(t *testing.T) {
			s := canary.Secret(i)
			_, err := r.Mutate(t.Context(), secretGVK, hooks.UpdatePhysical, canary.SecretJSON(i))
			if err == nil {
				t.Fatal("the failing hook did not fail the chain")
			}
			canary.Check(t, "the error of Runner.Mutate", errorTexts(err), canary.Value)
			for _, seen := range obs.take() {
				canary.Check(t, "the error given to the Observer", errorTexts(seen), canary.Value)
				var w *failure.WithheldError
				if !errors.As(seen, &w) {
					t.Errorf("the Observer was given %T, not the withheld error", seen)
				}
			}

			msg := err.Error()
			if want := `hook "leaky" UpdatePhysical Secret: the hook `; !strings.HasPrefix(msg, want) {
				t.Errorf("message %q does not start with %q", msg, want)
			}
			if !detailText.MatchString(msg) || !strings.Contains(msg, "is withheld") {
				t.Errorf("message %q lacks the withheld detail", msg)
			}
			var he *failure.HookError
			if !errors.As(err, &he) || he.Hook != "leaky" || he.Type != hooks.UpdatePhysical || he.GVK != secretGVK {
				t.Errorf("errors.As(*HookError) = %+v", he)
			}
			var w *failure.WithheldError
			if !errors.As(err, &w) || w.Panicked != leak.Panics(s) || len(w.Detail) != failure.DetailDigits {
				t.Errorf("errors.As(*WithheldError) = %+v; the leak panics: %v", w, leak.Panics(s))
			}
			var pe *failure.PanicError
			if errors.As(err, &pe) != leak.Panics(s) {
				t.Errorf("errors.As(*PanicError) = %v, want %v", pe != nil, leak.Panics(s))
			} else if pe != nil && (pe.Stack != nil || pe.Value != "withheld") {
				t.Errorf("the panic keeps value %q and a stack of %d bytes", pe.Value, len(pe.Stack))
			}
			want := webhook.StatusCode(&failure.HookError{Hook: "leaky", Type: hooks.UpdatePhysical, GVK: secretGVK, Err: leak.Cause(s)})
			if got := webhook.StatusCode(err); got != want {
				t.Errorf("StatusCode = %d, want %d as for the hook's own error", got, want)
			}
		})
	}
}

func TestTheDetailOfAWithheldMessageTellsRepeatsFromOtherFailures(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(canary.Hook("leaky", hooks.UpdatePhysical))
	r := engine.NewRunner(reg, engine.RunnerOptions{})
	detail := func(leak int) string {
		_, err := r.Mutate(t.Context(), secretGVK, hooks.UpdatePhysical, canary.SecretJSON(leak))
		var w *failure.WithheldError
		if !errors.As(err, &w) {
			t.Fatalf("leak %d: %v is not withheld", leak, err)
		}
		return w.Detail
	}
	cases := []struct {
		name     string
		a, b     int // indexes into canary.Leaks
		wantSame bool
	}{
		{"the same failure twice has the same detail", 1, 1, true},
		{"a failure quoting the value and one printing its bytes have different details", 0, 1, false},
		{"two panics with different values have different details", 10, 11, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := detail(tc.a), detail(tc.b)
			if (a == b) != tc.wantSame {
				t.Errorf("details %s and %s; want equal: %v", a, b, tc.wantSame)
			}
		})
	}
}

func TestAFailingItemOfASecretListLeavesNoValue(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(canary.Hook("leaky", hooks.GetPhysical))
	r := engine.NewRunner(reg, engine.RunnerOptions{})
	for i, leak := range canary.Leaks {
		t.Run(leak.Name, func(t *testing.T) {
			list := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"SecretList","items":[%s,%s]}`, canary.SecretJSON(-1), canary.SecretJSON(i))
			_, err := r.Mutate(t.Context(), secretListGVK, hooks.GetPhysical, list)
			var ie *engine.ItemError
			if !errors.As(err, &ie) || ie.Index != 1 {
				t.Fatalf("error %v, want item 1's", err)
			}
			canary.Check(t, "the error of a SecretList", errorTexts(err), canary.Value)
			want := webhook.StatusCode(&failure.HookError{Err: leak.Cause(canary.Secret(i))})
			if got := webhook.StatusCode(err); got != want {
				t.Errorf("StatusCode = %d, want %d", got, want)
			}
		})
	}
}

// TestALabelHookFailingOnASecretLeavesNoValue runs hooks on the label/annotation fast path,
// which never decodes the Secret but sees its annotations, where kubectl keeps a copy of the
// whole Secret (last-applied-configuration).
func TestALabelHookFailingOnASecretLeavesNoValue(t *testing.T) {
	var typedCalls atomic.Int32
	typed := func(context.Context, client.Object) (client.Object, error) {
		typedCalls.Add(1)
		return nil, errors.New("the typed path ran")
	}
	obs := &errorsObserver{}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		hooks.NewMetadataFunc("meta-error", &corev1.Secret{}, []hooks.HookType{hooks.CreateVirtual}, typed,
			func(_ context.Context, m *hooks.Metadata) error {
				return fmt.Errorf("annotations %v are not allowed", m.Annotations)
			}),
		hooks.NewMetadataFunc("meta-panic", &corev1.Secret{}, []hooks.HookType{hooks.DeleteVirtual}, typed,
			func(_ context.Context, m *hooks.Metadata) error {
				panic(m.Annotations)
			}),
	)
	r := engine.NewRunner(reg, engine.RunnerOptions{Observer: obs})
	cases := []struct {
		name   string
		typ    hooks.HookType
		hook   string
		status int32
	}{
		{"a label hook's error that prints the annotations is withheld", hooks.CreateVirtual, "meta-error", 403},
		{"a label hook's panic with the annotations is withheld", hooks.DeleteVirtual, "meta-panic", 500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Mutate(t.Context(), secretGVK, tc.typ, canary.SecretJSON(-1))
			if err == nil {
				t.Fatal("no error")
			}
			if typedCalls.Load() != 0 {
				t.Fatal("the chain ran on the typed path, not the label/annotation fast path")
			}
			canary.Check(t, "the error of the fast path", errorTexts(err), canary.Value)
			for _, seen := range obs.take() {
				canary.Check(t, "the error given to the Observer", errorTexts(seen), canary.Value)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("hook %q %s Secret: the hook ", tc.hook, tc.typ)) {
				t.Errorf("message %q", err.Error())
			}
			if got := webhook.StatusCode(err); got != tc.status {
				t.Errorf("StatusCode = %d, want %d", got, tc.status)
			}
		})
	}
}

func TestAHookFailingOnAnotherKindKeepsItsMessage(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("cm", &corev1.ConfigMap{}, []hooks.HookType{hooks.UpdatePhysical},
		func(_ context.Context, o client.Object) (client.Object, error) {
			return nil, fmt.Errorf("value %q is not allowed", o.(*corev1.ConfigMap).Data["k"])
		}))
	_, err := engine.NewRunner(reg, engine.RunnerOptions{}).Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		hooks.UpdatePhysical, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"plain"}}`))
	if want := `hook "cm" UpdatePhysical ConfigMap: value "plain" is not allowed`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
