package policy_test

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
	"github.com/synchook/synchook/internal/policy"
)

// notInTrusted is a policy written as an exclusion: every namespace but the trusted ones gets
// the label a=b. In a cluster a namespace without the trusted label is selected.
var notInTrusted = strings.Replace(manifest(labelMutation), "    resourceRules:",
	"    namespaceSelector: {matchExpressions: [{key: tier, operator: NotIn, values: [trusted]}]}\n    resourceRules:", 1)

// teamFromNamespaceObject copies the namespace's team label through namespaceObject.
var teamFromNamespaceObject = manifest(`  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"team": string(namespaceObject.metadata.labels["team"])}}}'
`)

func newPod(namespace string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
}

// runPolicy runs the policy of manifest m on a new pod in namespace under Source src (in
// admission mode: the pod's own namespace), in the background.
func runPolicy(ctx context.Context, t *testing.T, m string, src namespaces.Source, namespace string) <-chan lookupResult {
	t.Helper()
	p, err := load(t, m, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := p.MutateFunc(hooks.CreatePhysical)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan lookupResult, 1)
	go func() {
		o, err := fn(namespaces.WithSource(ctx, src), newPod(namespace))
		r := lookupResult{err: err}
		if o != nil {
			r.labels = o.GetLabels()
		}
		out <- r
	}()
	return out
}

type lookupResult struct {
	labels map[string]string
	err    error
}

// TestANamespaceTheCacheHasNotSeenIsWaitedFor: a tenant creates a namespace and a pod at once,
// and the pod reaches the policy before the namespace cache's watch delivers the namespace. A
// NotIn namespaceSelector must not skip the pod as if its namespace had no labels (the old
// behaviour: "matches nothing"), and namespaceObject must not be null: the request waits for
// the namespace, or fails naming it.
func TestANamespaceTheCacheHasNotSeenIsWaitedFor(t *testing.T) {
	fresh := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Labels: map[string]string{"team": "payments"}}}
	for _, tt := range []struct {
		name, manifest, what string
		want                 map[string]string // the labels when the namespace arrives
	}{
		{"NotIn namespaceSelector", notInTrusted, "spec.matchConstraints.namespaceSelector", map[string]string{"a": "b"}},
		{"namespaceObject", teamFromNamespaceObject, "namespaceObject", map[string]string{"team": "payments"}},
	} {
		t.Run(tt.name+": the watch delivers the namespace while the request waits: the policy runs", func(t *testing.T) {
			c := namespacestest.New(t, namespacestest.Options{Listed: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "other"}}}})
			res := runPolicy(t.Context(), t, tt.manifest, namespaces.Source{Lookup: c.Cache}, "fresh")
			namespacestest.WaitingFor(t, c, "fresh", res)
			c.Deliver(t, fresh)
			r := <-res
			if r.err != nil || !equalMaps(r.labels, tt.want) {
				t.Fatalf("labels %v, error %v; want labels %v", r.labels, r.err, tt.want)
			}
		})
		wantFailure := func(t *testing.T, err, sentinel error) {
			t.Helper()
			if !errors.Is(err, sentinel) || !errors.Is(err, policy.ErrMutation) {
				t.Fatalf("error %v, want one wrapping %v and ErrMutation", err, sentinel)
			}
			if want := tt.what + `: namespace "fresh"`; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		t.Run(tt.name+": the deadline passes first: the request fails naming the namespace", func(t *testing.T) {
			c := namespacestest.New(t, namespacestest.Options{Read: namespacestest.Hang})
			ctx, cancel := context.WithCancelCause(t.Context())
			res := runPolicy(ctx, t, tt.manifest, namespaces.Source{Lookup: c.Cache}, "fresh")
			namespacestest.WaitingFor(t, c, "fresh", res)
			cancel(context.DeadlineExceeded)
			wantFailure(t, (<-res).err, namespaces.ErrUnknown)
		})
		t.Run(tt.name+": the direct read says the namespace does not exist: the request fails naming it", func(t *testing.T) {
			c := namespacestest.New(t, namespacestest.Options{Read: namespacestest.NotFound})
			wantFailure(t, (<-runPolicy(t.Context(), t, tt.manifest, namespaces.Source{Lookup: c.Cache}, "fresh")).err, namespaces.ErrNotFound)
		})
		t.Run(tt.name+": a namespace synchook test's file does not list: the request fails naming it", func(t *testing.T) {
			wantFailure(t, (<-runPolicy(t.Context(), t, tt.manifest, namespaces.Source{Lookup: namespaces.Static{}}, "fresh")).err, namespaces.ErrNotFound)
		})
		t.Run(tt.name+": offline (no namespace source): the request fails naming what needs it", func(t *testing.T) {
			r := <-runPolicy(t.Context(), t, tt.manifest, namespaces.Source{}, "fresh")
			if !errors.Is(r.err, namespaces.ErrNoSource) || !strings.Contains(r.err.Error(), tt.what) {
				t.Fatalf("error %v, want ErrNoSource for %s", r.err, tt.what)
			}
		})
	}
	t.Run("a NotIn selector still skips a trusted namespace and selects an untrusted one", func(t *testing.T) {
		src := namespaces.Source{Lookup: namespaces.Static{
			"trusted":   {ObjectMeta: metav1.ObjectMeta{Name: "trusted", Labels: map[string]string{"tier": "trusted"}}},
			"untrusted": {ObjectMeta: metav1.ObjectMeta{Name: "untrusted"}},
		}}
		if r := <-runPolicy(t.Context(), t, notInTrusted, src, "trusted"); r.err != nil || r.labels["a"] != "" {
			t.Errorf("trusted: labels %v, error %v; want no a=b", r.labels, r.err)
		}
		if r := <-runPolicy(t.Context(), t, notInTrusted, src, "untrusted"); r.err != nil || r.labels["a"] != "b" {
			t.Errorf("untrusted: labels %v, error %v; want a=b", r.labels, r.err)
		}
	})
}
