package namespaces_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/namespaces/namespacestest"
)

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// lookup is a Get of name through a Source over l, as hooks make it (errors name the namespace).
type lookup struct {
	ns  *corev1.Namespace
	err error
}

func get(ctx context.Context, l namespaces.Lookup, name string) <-chan lookup {
	out := make(chan lookup, 1)
	go func() {
		_, ns, err := namespaces.Source{Lookup: l}.Namespace(ctx, hooks.CreatePhysical, name, nil)
		out <- lookup{ns, err}
	}()
	return out
}

// wantNamed checks that err wraps sentinel and names the namespace, and says no label of it.
func wantNamed(t *testing.T, err, sentinel error, name string, labels ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want one wrapping %v", err, sentinel)
	}
	if !strings.Contains(err.Error(), `namespace "`+name+`"`) {
		t.Errorf("error %q does not name namespace %q", err, name)
	}
	for _, l := range labels {
		if strings.Contains(err.Error(), l) {
			t.Errorf("error %q says %q, a label of the namespace", err, l)
		}
	}
}

func TestCacheWaitsForANamespaceItHasNotSeen(t *testing.T) {
	t.Run("the watch delivers it while the request waits: the request gets it", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Listed: []*corev1.Namespace{namespace("old", nil)}})
		res := get(t.Context(), c.Cache, "new")
		namespacestest.WaitingFor(t, c, "new", res)
		c.Deliver(t, namespace("new", map[string]string{"team": "payments"}))
		r := <-res
		if r.err != nil || r.ns == nil || r.ns.Labels["team"] != "payments" {
			t.Fatalf("got %v, %v; want namespace new with team=payments", r.ns, r.err)
		}
		// Now in the cache: the next request reads it there, without waiting.
		if r := <-get(t.Context(), c.Cache, "new"); r.err != nil || r.ns.Labels["team"] != "payments" {
			t.Fatalf("second lookup: %v, %v", r.ns, r.err)
		}
		if w := c.Waits(); len(w) != 0 {
			t.Errorf("the second lookup waited for %v", w)
		}
	})
	t.Run("the direct read finds it before the watch delivers it: the request gets it, metadata only", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Read: func(_ context.Context, name string) (*corev1.Namespace, error) {
			ns := namespace(name, map[string]string{"team": "search"})
			ns.Spec.Finalizers = []corev1.FinalizerName{"kubernetes"}
			ns.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			return ns, nil
		}})
		r := <-get(t.Context(), c.Cache, "fresh")
		if r.err != nil || r.ns == nil || r.ns.Name != "fresh" || r.ns.Labels["team"] != "search" {
			t.Fatalf("got %v, %v; want namespace fresh with team=search", r.ns, r.err)
		}
		if len(r.ns.Spec.Finalizers) != 0 || len(r.ns.ManagedFields) != 0 {
			t.Errorf("the cache keeps more than name, labels and annotations: %+v", r.ns)
		}
	})
	t.Run("the deadline passes first: an error naming the namespace, never a namespace without labels", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Read: namespacestest.Hang})
		ctx, cancel := context.WithCancelCause(t.Context())
		res := get(ctx, c.Cache, "late")
		namespacestest.WaitingFor(t, c, "late", res)
		cancel(context.DeadlineExceeded) // the request's deadline, injected
		r := <-res
		if r.ns != nil {
			t.Fatalf("got namespace %v, want an error", r.ns)
		}
		wantNamed(t, r.err, namespaces.ErrUnknown, "late")
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("error %v does not say the deadline passed", r.err)
		}
	})
	t.Run("the direct read fails and the watch never delivers it: ErrUnknown naming it", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Listed: []*corev1.Namespace{namespace("old", nil)}})
		ctx, cancel := context.WithCancelCause(t.Context())
		res := get(ctx, c.Cache, "late")
		namespacestest.WaitingFor(t, c, "late", res)
		c.Deliver(t, namespace("other", nil)) // the watch runs, and delivers others
		cancel(context.DeadlineExceeded)
		r := <-res
		wantNamed(t, r.err, namespaces.ErrUnknown, "late")
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("error %v does not say the deadline passed", r.err)
		}
	})
	t.Run("the direct read says it does not exist: ErrNotFound naming it", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Read: namespacestest.NotFound})
		r := <-get(t.Context(), c.Cache, "gone")
		wantNamed(t, r.err, namespaces.ErrNotFound, "gone")
		if r.ns != nil {
			t.Errorf("got namespace %v with the error", r.ns)
		}
	})
	t.Run("a namespace of the first list is read from the cache", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Listed: []*corev1.Namespace{namespace("payments", map[string]string{"team": "payments"})}})
		// The first lookup may come before the first list (the direct read fails): it waits for it.
		if r := <-get(t.Context(), c.Cache, "payments"); r.err != nil || r.ns.Labels["team"] != "payments" {
			t.Fatalf("got %v, %v", r.ns, r.err)
		}
		c.Waits()
		if r := <-get(t.Context(), c.Cache, "payments"); r.err != nil || r.ns.Labels["team"] != "payments" {
			t.Fatalf("got %v, %v", r.ns, r.err)
		}
		if w := c.Waits(); len(w) != 0 {
			t.Errorf("a lookup of a cached namespace waited for %v", w)
		}
	})
	t.Run("a closed cache fails a waiting request", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Read: namespacestest.Hang})
		res := get(t.Context(), c.Cache, "late")
		namespacestest.WaitingFor(t, c, "late", res)
		c.Cache.Close()
		wantNamed(t, (<-res).err, namespaces.ErrUnknown, "late")
	})
}

func TestStaticDoesNotFindANamespaceItDoesNotList(t *testing.T) {
	s := namespaces.Static{"payments": namespace("payments", map[string]string{"team": "payments"})}
	if r := <-get(t.Context(), s, "payments"); r.err != nil || r.ns.Labels["team"] != "payments" {
		t.Fatalf("got %v, %v", r.ns, r.err)
	}
	wantNamed(t, (<-get(t.Context(), s, "search")).err, namespaces.ErrNotFound, "search", "payments")
}

func TestSourceNamespace(t *testing.T) {
	src := namespaces.Source{Lookup: namespaces.Static{"tenant": namespace("tenant", nil)}, Virtual: true}
	annotated := map[string]string{namespaces.ObjectNamespaceAnnotation: "tenant"}
	for name, tt := range map[string]struct {
		typ         hooks.HookType
		namespace   string
		annotations map[string]string
		want        string
		wantErr     error
	}{
		"a host object: its object-namespace":               {hooks.CreatePhysical, "vcluster-host", annotated, "tenant", nil},
		"a host object vcluster did not sync: none":         {hooks.CreatePhysical, "vcluster-host", nil, "", nil},
		"a virtual object: its own namespace":               {hooks.CreateVirtual, "tenant", nil, "tenant", nil},
		"a cluster-scoped object: none":                     {hooks.CreateVirtual, "", nil, "", nil},
		"a namespace the lookup does not have: named error": {hooks.CreateVirtual, "other", nil, "other", namespaces.ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			got, ns, err := src.Namespace(t.Context(), tt.typ, tt.namespace, tt.annotations)
			if got != tt.want {
				t.Errorf("name %q, want %q", got, tt.want)
			}
			if tt.wantErr != nil {
				wantNamed(t, err, tt.wantErr, tt.want)
				return
			}
			if err != nil || (ns == nil) != (tt.want == "") {
				t.Errorf("namespace %v, error %v", ns, err)
			}
		})
	}
	t.Run("a Lookup answering nil, nil: ErrNotFound", func(t *testing.T) {
		_, _, err := namespaces.Source{Lookup: nilLookup{}}.Namespace(t.Context(), hooks.CreateVirtual, "x", nil)
		wantNamed(t, err, namespaces.ErrNotFound, "x")
	})
}

type nilLookup struct{}

func (nilLookup) Get(context.Context, string) (*corev1.Namespace, error) { return nil, nil }
