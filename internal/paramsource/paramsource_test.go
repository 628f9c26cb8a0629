package paramsource_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/synchook/synchook/internal/paramsource"
)

var (
	configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")
	configMap  = corev1.SchemeGroupVersion.WithKind("ConfigMap")
)

// cm is a ConfigMap param with labels and annotations.
func cm(namespace, name string, lbls, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configMap)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(lbls)
	u.SetAnnotations(annotations)
	_ = unstructured.SetNestedField(u.Object, "v", "data", "k")
	return u
}

// vclusterMarked is how vcluster v0.36 writes a tenant ConfigMap into the host: its markers on
// top of the tenant's labels.
func vclusterMarked(namespace, name string, lbls map[string]string) *unstructured.Unstructured {
	l := map[string]string{"vcluster.loft.sh/managed-by": "tenant-a", "vcluster.loft.sh/namespace": "default"}
	for k, v := range lbls {
		l[k] = v
	}
	return cm(namespace, name, l, map[string]string{
		"vcluster.loft.sh/object-name": name, "vcluster.loft.sh/object-namespace": "default",
	})
}

// fakeHost is a Host over a fake dynamic client holding objs, whose own namespace is
// "vcluster-a", with tweak applied to the fake (reactors) before the Host is made.
func fakeHost(t *testing.T, tweak func(*dynamicfake.FakeDynamicClient), objs ...runtime.Object) (*paramsource.Host, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"}, objs...)
	if tweak != nil {
		tweak(dc)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(configMap, meta.RESTScopeNamespace)
	h := paramsource.NewFor(paramsource.Client{Dynamic: dc, Mapper: mapper}, "vcluster-a", paramsource.Options{SyncTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second})
	t.Cleanup(h.Close)
	return h, dc
}

// listedIn reports whether dc was asked to list or watch configmaps in namespace.
func listedIn(dc *dynamicfake.FakeDynamicClient, namespace string) bool {
	for _, a := range dc.Actions() {
		if (a.GetVerb() == "list" || a.GetVerb() == "watch" || a.GetVerb() == "get") && a.GetNamespace() == namespace {
			return true
		}
	}
	return false
}

func TestHostParamsComeOnlyFromTheNamedNamespacesAndNeverFromVCluster(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"team": "a"})
	objs := []runtime.Object{
		cm("platform", "tolerations", map[string]string{"team": "a"}, nil),
		cm("platform", "other", map[string]string{"team": "b"}, nil),
		vclusterMarked("platform", "synced", map[string]string{"team": "a"}),
		cm("vcluster-a", "tolerations", map[string]string{"team": "a"}, nil),
		vclusterMarked("vcluster-a", "tolerations-x", map[string]string{"team": "a"}),
		cm("elsewhere", "tolerations", map[string]string{"team": "a"}, nil),
	}
	tests := []struct {
		name      string
		namespace string
		get       string // a Get of this name; else a List with sel
		want      []string
	}{
		{name: "a name in a named namespace is found", namespace: "platform", get: "tolerations", want: []string{"tolerations"}},
		{name: "a selector in a named namespace lists what it matches and no synced object", namespace: "platform", want: []string{"tolerations"}},
		{name: "a synced object named by a paramRef is not found", namespace: "platform", get: "synced"},
		{name: "the vcluster's host namespace is never read even when named", namespace: "vcluster-a", get: "tolerations"},
		{name: "a selector finds nothing in the vcluster's host namespace", namespace: "vcluster-a"},
		{name: "a namespace the entry does not name is never read", namespace: "elsewhere", get: "tolerations"},
		{name: "a selector finds nothing in a namespace the entry does not name", namespace: "elsewhere"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, dc := fakeHost(t, nil, objs...)
			src := h.In([]string{"platform", "vcluster-a"})
			var got []string
			if tc.get != "" {
				u, err := src.Get(t.Context(), configMap, tc.namespace, tc.get)
				if err != nil {
					t.Fatal(err)
				}
				if u != nil {
					got = append(got, u.GetName())
				}
			} else {
				l, err := src.List(t.Context(), configMap, tc.namespace, sel)
				if err != nil {
					t.Fatal(err)
				}
				for _, u := range l {
					got = append(got, u.GetName())
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if tc.namespace != "platform" && listedIn(dc, tc.namespace) {
				t.Errorf("namespace %s was read: %v", tc.namespace, dc.Actions())
			}
		})
	}
}

func TestHostParamsBehaveAsKubeAPIServersOnAMissAndAnUnsyncedCache(t *testing.T) {
	t.Run("a name the watch has not delivered is read directly, a synced one of that name is not", func(t *testing.T) {
		silent := watch.NewFake() // the watch never delivers
		h, dc := fakeHost(t, func(dc *dynamicfake.FakeDynamicClient) {
			dc.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) { return true, silent, nil })
		})
		src := h.In([]string{"platform"})
		if u, err := src.Get(t.Context(), configMap, "platform", "late"); err != nil || u != nil {
			t.Fatalf("before it exists: %v, %v", u, err)
		}
		for _, o := range []*unstructured.Unstructured{cm("platform", "late", nil, nil), vclusterMarked("platform", "late-synced", nil)} {
			if _, err := dc.Resource(configMaps).Namespace("platform").Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		u, err := src.Get(t.Context(), configMap, "platform", "late")
		if err != nil || u == nil || u.GetName() != "late" {
			t.Fatalf("Get of a param the cache does not hold = %v, %v; want the direct read's", u, err)
		}
		if u, err := src.Get(t.Context(), configMap, "platform", "late-synced"); err != nil || u != nil {
			t.Errorf("Get of a synced object by a direct read = %v, %v; want none", u, err)
		}
	})
	t.Run("a cache that cannot list is an error after a bounded wait, naming why", func(t *testing.T) {
		dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"})
		dc.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(configMaps.GroupResource(), "", errors.New("RBAC says no"))
		})
		mapper := meta.NewDefaultRESTMapper(nil)
		mapper.Add(configMap, meta.RESTScopeNamespace)
		h := paramsource.NewFor(paramsource.Client{Dynamic: dc, Mapper: mapper}, "", paramsource.Options{SyncTimeout: 200 * time.Millisecond})
		t.Cleanup(h.Close)
		for _, call := range []func() error{
			func() error {
				_, err := h.In([]string{"platform"}).Get(t.Context(), configMap, "platform", "x")
				return err
			},
			func() error {
				_, err := h.In([]string{"platform"}).List(t.Context(), configMap, "platform", labels.Everything())
				return err
			},
		} {
			err := call()
			if !errors.Is(err, paramsource.ErrNotSynced) || !strings.Contains(err.Error(), `namespace "platform"`) {
				t.Errorf("err = %v, want ErrNotSynced naming the namespace", err)
			}
		}
		err := func() error {
			_, err := h.In([]string{"platform"}).Get(t.Context(), configMap, "platform", "x")
			return err
		}()
		if !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("err = %v, want the list's forbidden", err)
		}
	})
	t.Run("a Host without a cluster fails with ErrNoHost", func(t *testing.T) {
		h := paramsource.New(paramsource.Options{})
		t.Cleanup(h.Close)
		src := h.In([]string{"platform"})
		if _, err := src.Namespaced(t.Context(), configMap); !errors.Is(err, paramsource.ErrNoHost) {
			t.Errorf("Namespaced = %v, want ErrNoHost", err)
		}
		if _, err := src.Get(t.Context(), configMap, "platform", "x"); !errors.Is(err, paramsource.ErrNoHost) {
			t.Errorf("Get = %v, want ErrNoHost", err)
		}
	})
}
