package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/namespaces/namespacestest"
)

var tenantNamespaces = namespaces.Static{
	"payments": {ObjectMeta: metav1.ObjectMeta{Name: "payments", Labels: map[string]string{
		"team": "payments", "billing.example.com/cost-center": "cc-7", "other": "x",
		"vcluster.loft.sh/forged": "y", "synchook.io/forged": "z", "bad": "not a label value!",
	}}},
	"search": {ObjectMeta: metav1.ObjectMeta{Name: "search", Labels: map[string]string{"team": "search"}}},
}

var copyTeam = builtin.Labels{
	Labels:        map[string]string{"platform.example.com/managed": "true"},
	FromNamespace: &builtin.FromNamespace{Keys: []string{"team", "bad"}, Prefixes: []string{"billing.example.com/", "vcluster.", "synchook"}, Rename: map[string]string{"team": "tenant.example.com/team"}},
}

// hostPod is a pod as vcluster writes it to the host: in the host namespace, with the
// namespace of its virtual twin in vcluster.loft.sh/object-namespace, and whatever the tenant
// put in vcluster.loft.sh/namespace.
func hostPod(objectNamespace, tenantAnnotation string) *corev1.Pod {
	a := map[string]string{}
	if objectNamespace != "" {
		a[namespaces.ObjectNamespaceAnnotation] = objectNamespace
	}
	if tenantAnnotation != "" {
		a["vcluster.loft.sh/namespace"] = tenantAnnotation
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "vcluster-host", Annotations: a}}
}

func runLabels(t *testing.T, ctx context.Context, typ hooks.HookType, pod *corev1.Pod) (map[string]string, error) {
	t.Helper()
	out, err := builtin.LabelsFuncFor(copyTeam, typ)(ctx, pod)
	if err != nil {
		return nil, err
	}
	return out.GetLabels(), nil
}

func TestFromNamespaceCopiesTheLabelsOfTheNamespaceTheObjectCameFrom(t *testing.T) {
	vcluster := namespaces.WithSource(t.Context(), namespaces.Source{Lookup: tenantNamespaces, Virtual: true})
	for name, tt := range map[string]struct {
		ctx  context.Context
		typ  hooks.HookType
		pod  *corev1.Pod
		want string
	}{
		"a host pod from payments gets payments' labels, renamed, and only those asked for": {
			vcluster, hooks.CreatePhysical, hostPod("payments", ""),
			"billing.example.com/cost-center=cc-7 platform.example.com/managed=true tenant.example.com/team=payments",
		},
		"a host pod from search gets search's": {vcluster, hooks.UpdatePhysical, hostPod("search", ""), "platform.example.com/managed=true tenant.example.com/team=search"},
		"the tenant's vcluster.loft.sh/namespace annotation is not where it came from": {
			vcluster, hooks.CreatePhysical, hostPod("search", "payments"), "platform.example.com/managed=true tenant.example.com/team=search",
		},
		"a host object vcluster did not sync (no object-namespace) gets none": {vcluster, hooks.CreatePhysical, hostPod("", "payments"), "platform.example.com/managed=true"},
		"a virtual object's object-namespace annotation is the tenant's: its own namespace counts": {
			vcluster, hooks.CreateVirtual, func() *corev1.Pod { p := hostPod("payments", ""); p.Namespace = "search"; return p }(),
			"platform.example.com/managed=true tenant.example.com/team=search",
		},
		"outside vcluster the object's own namespace counts": {
			namespaces.WithSource(t.Context(), namespaces.Source{Lookup: tenantNamespaces}), hooks.CreatePhysical,
			func() *corev1.Pod { p := hostPod("search", ""); p.Namespace = "payments"; return p }(),
			"billing.example.com/cost-center=cc-7 platform.example.com/managed=true tenant.example.com/team=payments",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := runLabels(t, tt.ctx, tt.typ, tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			var kv []string
			for k, v := range got {
				kv = append(kv, k+"="+v)
			}
			if s := strings.Join(slices.Sorted(slices.Values(kv)), " "); s != tt.want {
				t.Errorf("labels %s, want %s", s, tt.want)
			}
		})
	}
	t.Run("a namespace that does not exist fails the hook, naming it", func(t *testing.T) {
		_, err := runLabels(t, vcluster, hooks.CreatePhysical, hostPod("gone", ""))
		if !errors.Is(err, namespaces.ErrNotFound) || !strings.Contains(err.Error(), `fromNamespace: namespace "gone"`) {
			t.Errorf("error %v, want ErrNotFound naming namespace gone", err)
		}
	})
	t.Run("without a namespace source the hook fails rather than write without the labels", func(t *testing.T) {
		if _, err := runLabels(t, t.Context(), hooks.CreatePhysical, hostPod("payments", "")); !errors.Is(err, namespaces.ErrNoSource) {
			t.Errorf("error %v, want ErrNoSource", err)
		}
	})
}

func TestCheckFromNamespaceNamesTheBadKey(t *testing.T) {
	for name, tt := range map[string]struct {
		f    builtin.FromNamespace
		want string
	}{
		"nothing to copy":          {builtin.FromNamespace{}, "keys or prefixes: at least one"},
		"a reserved target":        {builtin.FromNamespace{Keys: []string{"team"}, Rename: map[string]string{"team": "vcluster.loft.sh/team"}}, `rename[team] "vcluster.loft.sh/team": under vcluster.loft.sh/`},
		"a reserved key kept":      {builtin.FromNamespace{Keys: []string{"synchook.io/x"}}, `keys[0] "synchook.io/x": under`},
		"a reserved prefix":        {builtin.FromNamespace{Prefixes: []string{"synchook.io/t"}}, `prefixes[0] "synchook.io/t": would copy labels under synchook.io/`},
		"a prefix over a reserved": {builtin.FromNamespace{Prefixes: []string{"vcl"}}, `prefixes[0] "vcl"`},
		"an invalid key":           {builtin.FromNamespace{Keys: []string{"no spaces"}}, `keys[0] "no spaces"`},
		"a rename of nothing":      {builtin.FromNamespace{Keys: []string{"a"}, Rename: map[string]string{"b": "c"}}, `rename[b]: keys and prefixes do not copy "b"`},
	} {
		err := builtin.CheckFromNamespace(tt.f)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, builtin.ErrFromNamespace) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tt.want)
		}
	}
}

// TestFromNamespaceWaitsForANamespaceTheCacheHasNotSeen: a tenant creates a namespace and a pod
// at once, and the pod reaches the hook before the namespace cache's watch delivers the
// namespace. The hook waits for it within the request's deadline and copies its labels, or fails
// naming the namespace; it never writes the pod without them.
func TestFromNamespaceWaitsForANamespaceTheCacheHasNotSeen(t *testing.T) {
	payments := tenantNamespaces["payments"]
	run := func(ctx context.Context, c *namespacestest.Cluster) <-chan error {
		out := make(chan error, 1)
		go func() {
			got, err := runLabels(t, namespaces.WithSource(ctx, namespaces.Source{Lookup: c.Cache, Virtual: true}), hooks.CreatePhysical, hostPod("payments", ""))
			if err == nil && got["tenant.example.com/team"] != "payments" {
				err = fmt.Errorf("labels %v, want tenant.example.com/team=payments", got)
			}
			out <- err
		}()
		return out
	}
	t.Run("the watch delivers the namespace while the hook waits: the pod gets its labels", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{})
		res := run(t.Context(), c)
		namespacestest.WaitingFor(t, c, "payments", res)
		c.Deliver(t, payments)
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the deadline passes first: the hook fails naming the namespace", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Read: namespacestest.Hang})
		ctx, cancel := context.WithCancelCause(t.Context())
		res := run(ctx, c)
		namespacestest.WaitingFor(t, c, "payments", res)
		cancel(context.DeadlineExceeded)
		err := <-res
		if !errors.Is(err, namespaces.ErrUnknown) || !strings.Contains(err.Error(), `fromNamespace: namespace "payments"`) {
			t.Fatalf("error %v, want ErrUnknown naming namespace payments", err)
		}
	})
	t.Run("the direct read says the namespace does not exist: the hook fails naming it", func(t *testing.T) {
		c := namespacestest.New(t, namespacestest.Options{Read: namespacestest.NotFound})
		err := <-run(t.Context(), c)
		if !errors.Is(err, namespaces.ErrNotFound) || !strings.Contains(err.Error(), `fromNamespace: namespace "payments"`) {
			t.Fatalf("error %v, want ErrNotFound naming namespace payments", err)
		}
	})
}
