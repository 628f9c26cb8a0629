package hookstest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/hooks/hookstest"
	"github.com/synchook/synchook/patch"
)

func newPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
}

func tenantLabel(_ context.Context, pod *corev1.Pod) error {
	pod.Labels["tenant"] = "a"
	return nil
}

func TestRunReturnsTheTypedResultAndThePatch(t *testing.T) {
	pod := newPod()
	out, p, err := hookstest.Run(t, hooks.Typed("tenant", []hooks.HookType{hooks.CreatePhysical}, tenantLabel), hooks.CreatePhysical, pod)
	if err != nil {
		t.Fatal(err)
	}
	if out.Labels["tenant"] != "a" || out.Spec.Containers[0].Image != "nginx" {
		t.Errorf("result %+v, want the pod with the tenant label", out)
	}
	if out.APIVersion != "" || out.Kind != "" {
		t.Errorf("result TypeMeta %+v, want the one given (empty)", out.TypeMeta)
	}
	if _, ok := out.Annotations["synchook.io/undo"]; !ok {
		t.Errorf("annotations %v: a write records its undo", out.Annotations)
	}
	if !strings.Contains(string(p), `{"op":"add","path":"/metadata/labels/tenant","value":"a"}`) {
		t.Errorf("patch %s lacks the label", p)
	}
	if _, ok := pod.Labels["tenant"]; ok {
		t.Error("Run changed the object it was given")
	}
}

func TestRunWithoutAHookForTheTypeChangesNothing(t *testing.T) {
	out, p, err := hookstest.Run(t, hooks.Typed("tenant", []hooks.HookType{hooks.CreatePhysical}, tenantLabel), hooks.UpdateVirtual, newPod())
	if err != nil || p != nil || out.Labels["tenant"] != "" {
		t.Errorf("out labels %v, patch %s, err %v; want the pod unchanged", out.Labels, p, err)
	}
}

func TestRunReturnsTheHooksErrorAndTheGuards(t *testing.T) {
	boom := errors.New("boom")
	_, _, err := hookstest.Run(t, hooks.Typed("fails", []hooks.HookType{hooks.CreatePhysical}, func(context.Context, *corev1.Pod) error { return boom }), hooks.CreatePhysical, newPod())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `"fails"`) {
		t.Errorf("error %v, want one naming the hook and wrapping its own", err)
	}
	rename := hooks.Typed("rename", []hooks.HookType{hooks.CreatePhysical}, func(_ context.Context, pod *corev1.Pod) error {
		pod.Name = "other"
		return nil
	})
	_, _, err = hookstest.Run(t, rename, hooks.CreatePhysical, newPod())
	var forbidden *patch.ForbiddenPathError
	if !errors.As(err, &forbidden) || forbidden.Path != "/metadata/name" {
		t.Errorf("error %v, want the guard's refusal of /metadata/name", err)
	}
}

func TestRunWithholdsTheMessagesOfHooksOnSecrets(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, Data: map[string][]byte{"password": []byte("hunter2")}}
	leaky := hooks.Typed("leaky", []hooks.HookType{hooks.CreatePhysical}, func(_ context.Context, s *corev1.Secret) error {
		return fmt.Errorf("bad password %s", s.Data["password"])
	})
	_, _, err := hookstest.Run(t, leaky, hooks.CreatePhysical, secret)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), `"leaky"`) {
		t.Errorf("error %v, want one naming the hook without its message", err)
	}
}

func TestRunTakesTheFastPathOfAMetadataHook(t *testing.T) {
	var typed bool
	h := hooks.NewMetadataFunc("labels", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical},
		func(_ context.Context, obj client.Object) (client.Object, error) {
			typed = true
			obj.SetLabels(map[string]string{"app": "web", "fast": "no"})
			return obj, nil
		},
		func(_ context.Context, m *hooks.Metadata) error {
			m.Labels["fast"] = "yes"
			return nil
		})
	out, _, err := hookstest.Run(t, h, hooks.CreatePhysical, newPod())
	if err != nil {
		t.Fatal(err)
	}
	// The idempotency check at start may run the typed form; the request itself must not.
	if out.Labels["fast"] != "yes" {
		t.Errorf("labels %v (typed form called: %v), want the fast path's", out.Labels, typed)
	}
}

func TestRunOnACustomResource(t *testing.T) {
	resource := &unstructured.Unstructured{}
	resource.SetAPIVersion("example.com/v1")
	resource.SetKind("Widget")
	h := hooks.NewFunc("widgets", resource, []hooks.HookType{hooks.CreateVirtual}, func(_ context.Context, obj client.Object) (client.Object, error) {
		u := obj.(*unstructured.Unstructured)
		return u, unstructured.SetNestedField(u.Object, int64(3), "spec", "size")
	})
	in := resource.DeepCopy()
	in.SetName("w")
	out, _, err := hookstest.Run(t, h, hooks.CreateVirtual, in)
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(out.Object, "spec", "size"); size != 3 || out.GetKind() != "Widget" {
		t.Errorf("result %v, want a Widget of size 3", out.Object)
	}
}

func TestRoundTripGivesTheObjectBack(t *testing.T) {
	pod := newPod()
	written := hookstest.RoundTrip(t, hooks.Typed("tenant", []hooks.HookType{hooks.CreatePhysical}, tenantLabel), hooks.CreatePhysical, pod)
	if written.Labels["tenant"] != "a" {
		t.Errorf("written labels %v, want the tenant label", written.Labels)
	}
}

// recorder is a testing.TB that records failures instead of failing the test; Fatal ends the
// goroutine as testing.T's does.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// failures runs f with a recorder and returns what it reported.
func failures(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return strings.Join(r.msgs, "\n")
}

// noUndo is a hook whose change the tenant is meant to see (hooks.Undoer).
type noUndo struct{ hooks.FuncHook }

func (noUndo) Undo() bool { return false }

func TestRoundTripReportsWhatTheReadDoesNotGiveBack(t *testing.T) {
	h := noUndo{hooks.Typed("visible", []hooks.HookType{hooks.CreatePhysical}, tenantLabel)}
	got := failures(t, func(tb testing.TB) { hookstest.RoundTrip(tb, h, hooks.CreatePhysical, newPod()) })
	if !strings.Contains(got, "CreatePhysical then GetPhysical does not give the object back") || !strings.Contains(got, `"path":"/metadata/labels/tenant"`) {
		t.Errorf("failures %q, want the tenant label named", got)
	}
	got = failures(t, func(tb testing.TB) { hookstest.RoundTrip(tb, h, hooks.GetPhysical, newPod()) })
	if !strings.Contains(got, "GetPhysical is no write hook type") {
		t.Errorf("failures %q, want GetPhysical refused", got)
	}
}

func TestRunReportsAHookThatIsNotIdempotent(t *testing.T) {
	h := hooks.Typed("append", []hooks.HookType{hooks.UpdatePhysical}, func(_ context.Context, pod *corev1.Pod) error {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: "x", Operator: corev1.TolerationOpExists})
		return nil
	})
	got := failures(t, func(tb testing.TB) { _, _, _ = hookstest.Run(tb, h, hooks.UpdatePhysical, newPod()) })
	if !strings.Contains(got, `hook "append" UpdatePhysical Pod is not idempotent`) {
		t.Errorf("failures %q, want the hook named as not idempotent", got)
	}
}

func TestRunStopsOnAHookItCannotRegister(t *testing.T) {
	h := hooks.Typed("", []hooks.HookType{hooks.CreatePhysical}, tenantLabel)
	if got := failures(t, func(tb testing.TB) { _, _, _ = hookstest.Run(tb, h, hooks.CreatePhysical, newPod()) }); !strings.Contains(got, "empty name") {
		t.Errorf("failures %q, want the empty name", got)
	}
}
