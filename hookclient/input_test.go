package hookclient_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/synchook/synchook/hookclient"
	"github.com/synchook/synchook/hooks"
)

// TestAmbiguousObjectsAreRefusals: an object with keys that encoding/json reads otherwise than
// synchook, or a list item of another kind, is refused with 400 and the engine's message (the
// message every transport gives): a denial, returned under Ignore too, never an unmutated
// write.
func TestAmbiguousObjectsAreRefusals(t *testing.T) {
	s := startSidecar(t, registry(t, hooks.NewFunc("label", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, labelFn("synchook.io/x", "y"))), "", nil)
	for _, policy := range []hookclient.FailurePolicy{hookclient.Fail, hookclient.Ignore} {
		c := newClient(t, s, hookclient.Options{FailurePolicies: map[hooks.HookType]hookclient.FailurePolicy{hooks.CreatePhysical: policy}})
		t.Run("Labels in metadata is a refusal naming the key under "+string(policy), func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "web", "namespace": "ns", "Labels": map[string]any{"tenant": "b"}},
			}}
			err := c.Mutate(t.Context(), hooks.CreatePhysical, obj)
			want := `CreatePhysical v1 Pod ns/web: denied by the sidecar (400): decode Pod object: metadata: key "Labels" differs only in case from "labels"`
			checkRefusal(t, err, want)
			if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "labels"); found {
				t.Errorf("a refused object was changed: %v", obj.Object)
			}
		})
		t.Run("a Secret inside a PodList is a refusal naming the item under "+string(policy), func(t *testing.T) {
			list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "PodList"}}
			secret := unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": "s", "namespace": "ns"}, "data": map[string]any{"k": "c2VjcmV0"},
			}}
			list.Items = []unstructured.Unstructured{secret}
			err := c.MutateList(t.Context(), hooks.CreatePhysical, list)
			want := `CreatePhysical v1 PodList 1 items: denied by the sidecar (400): PodList items[0] (ns/s): decode Pod object: item is v1/Secret but the list is of v1/Pod`
			checkRefusal(t, err, want)
		})
	}
}

// checkRefusal checks that err is a *hookclient.Error with code 400 wrapping ErrDenied, whose
// text is want.
func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	var hcErr *hookclient.Error
	if !errors.As(err, &hcErr) || !errors.Is(err, hookclient.ErrDenied) || hcErr.Code != 400 {
		t.Fatalf("error %v; want a denial with code 400", err)
	}
	if err.Error() != want {
		t.Errorf("error\n %s\nwant\n %s", err, want)
	}
}
