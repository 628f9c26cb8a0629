package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
)

func TestTypedRunsOnItsTypeForEachHookType(t *testing.T) {
	var seen []string
	h := hooks.Typed("tenant", []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical, hooks.CreatePhysical},
		func(_ context.Context, pod *corev1.Pod) error {
			seen = append(seen, pod.Name)
			pod.Labels = map[string]string{"tenant": "a"}
			return nil
		})
	if h.Name() != "tenant" {
		t.Errorf("name %q", h.Name())
	}
	if _, ok := h.Resource().(*corev1.Pod); !ok {
		t.Fatalf("resource %T, want *corev1.Pod", h.Resource())
	}
	funcs := h.MutateFuncs()
	if len(funcs) != 2 || funcs[hooks.CreatePhysical] == nil || funcs[hooks.UpdatePhysical] == nil {
		t.Fatalf("funcs %v, want CreatePhysical and UpdatePhysical", funcs)
	}
	in := &corev1.Pod{}
	in.Name = "web"
	out, err := funcs[hooks.UpdatePhysical](context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out != in || in.Labels["tenant"] != "a" || len(seen) != 1 || seen[0] != "web" {
		t.Errorf("out %p (in %p), labels %v, seen %v: want the same pod changed in place", out, in, in.Labels, seen)
	}
}

func TestTypedPassesTheHooksError(t *testing.T) {
	boom := errors.New("boom")
	h := hooks.Typed("fails", []hooks.HookType{hooks.GetVirtual}, func(context.Context, *corev1.Secret) error { return boom })
	if _, err := h.MutateFuncs()[hooks.GetVirtual](context.Background(), &corev1.Secret{}); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
}

func TestTypedFuncReturnsANewObject(t *testing.T) {
	h := hooks.TypedFunc("copy", []hooks.HookType{hooks.CreateVirtual}, func(_ context.Context, svc *corev1.Service) (*corev1.Service, error) {
		out := svc.DeepCopy()
		out.Spec.Type = corev1.ServiceTypeClusterIP
		return out, nil
	})
	in := &corev1.Service{}
	out, err := h.MutateFuncs()[hooks.CreateVirtual](context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	svc, ok := out.(*corev1.Service)
	if !ok || svc == in || svc.Spec.Type != corev1.ServiceTypeClusterIP || in.Spec.Type != "" {
		t.Errorf("out %#v, want a new ClusterIP service and the input unchanged", out)
	}
}

func TestTypedRefusesAnObjectOfAnotherType(t *testing.T) {
	h := hooks.Typed("pods", []hooks.HookType{hooks.CreatePhysical}, func(context.Context, *corev1.Pod) error { return nil })
	_, err := h.MutateFuncs()[hooks.CreatePhysical](context.Background(), &corev1.Service{})
	if err == nil || !strings.Contains(err.Error(), `hook "pods": object *v1.Service is not *v1.Pod`) {
		t.Errorf("error %v, want one naming both types", err)
	}
}

func TestTypedWithoutAStructHasNoResource(t *testing.T) {
	h := hooks.Typed("any", []hooks.HookType{hooks.CreatePhysical}, func(context.Context, client.Object) error { return nil })
	if h.Resource() != nil {
		t.Errorf("resource %v, want nil (Register refuses it)", h.Resource())
	}
	u := hooks.Typed("cr", []hooks.HookType{hooks.CreatePhysical}, func(context.Context, *unstructured.Unstructured) error { return nil })
	if r, ok := u.Resource().(*unstructured.Unstructured); !ok || r.GetKind() != "" {
		t.Errorf("resource %#v, want an empty Unstructured (Register refuses it: no kind)", u.Resource())
	}
}
