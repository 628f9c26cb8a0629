package hookclient_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/synchook/synchook/hookclient"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
)

// recorder is a pod hook for all eight hook types that records each call and sets the label
// "hooked-by" to the hook type. DeletePhysical refuses pods labelled protect=true.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) register(t *testing.T) *engine.Registry {
	t.Helper()
	reg := engine.NewRegistry(nil)
	funcs := map[hooks.HookType]hooks.MutateFunc{}
	for _, typ := range hooks.AllHookTypes() {
		funcs[typ] = func(_ context.Context, o client.Object) (client.Object, error) {
			r.mu.Lock()
			r.calls = append(r.calls, string(typ)+" "+o.GetName())
			r.mu.Unlock()
			if typ == hooks.DeletePhysical && o.GetLabels()["protect"] == "true" {
				return nil, errors.New("protected")
			}
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l["hooked-by"] = string(typ)
			o.SetLabels(l)
			return o, nil
		}
	}
	if err := reg.Register(funcsHook{name: "recorder", obj: &corev1.Pod{}, funcs: funcs}); err != nil {
		t.Fatal(err)
	}
	return reg
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

type funcsHook struct {
	name  string
	obj   client.Object
	funcs map[hooks.HookType]hooks.MutateFunc
}

func (h funcsHook) Name() string                                     { return h.name }
func (h funcsHook) Resource() client.Object                          { return h.obj }
func (h funcsHook) MutateFuncs() map[hooks.HookType]hooks.MutateFunc { return h.funcs }

func TestWrapRunsTheHooksOfItsSide(t *testing.T) {
	rec := &recorder{}
	s := startSidecar(t, rec.register(t), "", nil)
	hc := newClient(t, s, hookclient.Options{})
	inner := fake.NewClientBuilder().WithStatusSubresource(&corev1.Pod{}).Build()
	c := hookclient.Wrap(inner, hc, hookclient.Physical)
	ctx := t.Context()
	stored := func(name string) *corev1.Pod {
		t.Helper()
		var p corev1.Pod
		if err := inner.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}

	steps := []struct {
		name      string
		do        func(t *testing.T) error
		wantCalls []string
		wantLabel string // hooked-by of pod "web" as stored afterwards; "" to skip
	}{
		{"Create runs CreatePhysical before the write", func(*testing.T) error {
			return c.Create(ctx, pod("web", map[string]string{"drop": "x"}))
		}, []string{"CreatePhysical web"}, "CreatePhysical"},
		{"Get runs GetPhysical after the read", func(t *testing.T) error {
			var p corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &p); err != nil {
				return err
			}
			if p.Labels["hooked-by"] != "GetPhysical" {
				t.Errorf("read labels = %v", p.Labels)
			}
			return nil
		}, []string{"GetPhysical web"}, "CreatePhysical"},
		{"Update runs UpdatePhysical before the write", func(*testing.T) error {
			return c.Update(ctx, stored("web"))
		}, []string{"UpdatePhysical web"}, "UpdatePhysical"},
		{"Patch carries UpdatePhysical's change in a merge patch", func(*testing.T) error {
			p := stored("web")
			base := p.DeepCopy()
			p.Labels["hooked-by"] = "caller"
			p.Labels["patched"] = "yes"
			return c.Patch(ctx, p, client.MergeFrom(base))
		}, []string{"UpdatePhysical web"}, "UpdatePhysical"},
		{"Status().Update runs UpdatePhysical", func(*testing.T) error {
			p := stored("web")
			p.Labels["hooked-by"] = "caller"
			p.Status.Phase = corev1.PodRunning
			return c.Status().Update(ctx, p)
		}, []string{"UpdatePhysical web"}, ""},
		{"SubResource(status).Patch runs UpdatePhysical", func(*testing.T) error {
			p := stored("web")
			base := p.DeepCopy()
			p.Status.Phase = corev1.PodSucceeded
			return c.SubResource("status").Patch(ctx, p, client.MergeFrom(base))
		}, []string{"UpdatePhysical web"}, ""},
		{"List runs GetPhysical on every item", func(t *testing.T) error {
			if err := c.Create(ctx, pod("db", nil)); err != nil {
				return err
			}
			var list corev1.PodList
			if err := c.List(ctx, &list); err != nil {
				return err
			}
			for _, p := range list.Items {
				if p.Labels["hooked-by"] != "GetPhysical" {
					t.Errorf("listed %s with labels %v", p.Name, p.Labels)
				}
			}
			return nil
		}, []string{"CreatePhysical db", "GetPhysical db", "GetPhysical web"}, ""},
		{"Delete runs DeletePhysical before the delete", func(*testing.T) error {
			return c.Delete(ctx, pod("db", nil))
		}, []string{"DeletePhysical db"}, ""},
		{"a refused Delete deletes nothing", func(t *testing.T) error {
			err := c.Delete(ctx, pod("web", map[string]string{"protect": "true"}))
			if !errors.Is(err, hookclient.ErrDenied) {
				t.Errorf("error = %v, want ErrDenied", err)
			}
			return nil
		}, []string{"DeletePhysical web"}, ""},
		{"DeleteAllOf on a hooked kind is refused", func(t *testing.T) error {
			err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("ns"))
			if !errors.Is(err, hookclient.ErrUnsupported) {
				t.Errorf("error = %v, want ErrUnsupported", err)
			}
			return nil
		}, nil, ""},
		{"Apply on a hooked kind is refused", func(t *testing.T) error {
			err := c.Apply(ctx, corev1ac.Pod("web", "ns").WithLabels(map[string]string{"a": "b"}))
			if !errors.Is(err, hookclient.ErrUnsupported) {
				t.Errorf("error = %v, want ErrUnsupported", err)
			}
			return nil
		}, nil, ""},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if err := step.do(t); err != nil {
				t.Fatal(err)
			}
			calls := rec.take()
			slices.Sort(calls)
			if fmt.Sprint(calls) != fmt.Sprint(step.wantCalls) {
				t.Errorf("hook calls %v, want %v", calls, step.wantCalls)
			}
			if step.wantLabel != "" {
				if got := stored("web").Labels["hooked-by"]; got != step.wantLabel {
					t.Errorf("stored hooked-by = %q, want %q", got, step.wantLabel)
				}
			}
		})
	}
	p := stored("web")
	if p.Labels["patched"] != "yes" || p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("stored pod: labels %v phase %s", p.Labels, p.Status.Phase)
	}
	if n := s.count("/mutate/GetVirtual") + s.count("/mutate/CreateVirtual") + s.count("/mutate/UpdateVirtual"); n != 0 {
		t.Errorf("%d Virtual requests from a Physical client", n)
	}
}

func TestWrapVirtualSideAndUnhookedKinds(t *testing.T) {
	rec := &recorder{}
	s := startSidecar(t, rec.register(t), "", nil)
	hc := newClient(t, s, hookclient.Options{})
	inner := fake.NewClientBuilder().Build()
	c := hookclient.Wrap(inner, hc, hookclient.Virtual)
	ctx := t.Context()

	if err := c.Create(ctx, pod("web", nil)); err != nil {
		t.Fatal(err)
	}
	if calls := rec.take(); fmt.Sprint(calls) != "[CreateVirtual web]" {
		t.Errorf("calls %v, want [CreateVirtual web]", calls)
	}
	before := s.mutations()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = "ns", "settings"
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &corev1.ConfigMapList{}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if n := s.mutations() - before; n != 0 {
		t.Errorf("%d requests for a kind without hooks, want 0", n)
	}
}

func TestWrapWritesNothingWhenTheSidecarIsDown(t *testing.T) {
	rec := &recorder{}
	s := startSidecar(t, rec.register(t), "", nil)
	hc := newClient(t, s, hookclient.Options{Retries: hookclient.NoRetries})
	inner := fake.NewClientBuilder().Build()
	c := hookclient.Wrap(inner, hc, hookclient.Physical)
	ctx := t.Context()
	if err := hc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.srv.Close(); err != nil {
		t.Fatal(err)
	}
	err := c.Create(ctx, pod("web", nil))
	if !errors.Is(err, hookclient.ErrUnavailable) {
		t.Fatalf("error = %v, want ErrUnavailable", err)
	}
	var p corev1.Pod
	if err := inner.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &p); !apierrors.IsNotFound(err) {
		t.Errorf("Get after a failed Create: %v, want NotFound", err)
	}
}
