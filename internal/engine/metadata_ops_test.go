package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
)

// TestTheLabelPathNamesEachChangeByItsOperation holds the label/annotation path's patch: a key
// the request has is replaced (not added), a new key added, a gone key removed; and its answer,
// decoded into the request's Pod as vcluster decodes it, gives the hooked labels.
func TestTheLabelPathNamesEachChangeByItsOperation(t *testing.T) {
	const raw = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"1","b":"2"}}}`
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{
			"a label changed on a key the Pod has is a replace",
			map[string]string{"a": "9", "b": "2"},
			`[{"op":"replace","path":"/metadata/labels/a","value":"9"}]`,
		},
		{
			"a new label is an add",
			map[string]string{"a": "1", "b": "2", "c/d": "3"},
			`[{"op":"add","path":"/metadata/labels/c~1d","value":"3"}]`,
		},
		{
			"a gone label is a remove, beside a replace",
			map[string]string{"b": "7"},
			`[{"op":"remove","path":"/metadata/labels/a"},{"op":"replace","path":"/metadata/labels/b","value":"7"}]`,
		},
		{
			"every label gone is a remove each",
			map[string]string{},
			`[{"op":"remove","path":"/metadata/labels/a"},{"op":"remove","path":"/metadata/labels/b"}]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := engine.NewRegistry(nil)
			reg.MustRegister(hooks.NewMetadataFunc("labels", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical},
				func(context.Context, client.Object) (client.Object, error) {
					return nil, errors.New("the typed path ran, want the label/annotation path")
				},
				func(_ context.Context, m *hooks.Metadata) error {
					m.Labels = maps.Clone(tc.labels)
					return nil
				}))
			res, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Patch) != tc.want {
				t.Errorf("patch = %s, want %s", res.Patch, tc.want)
			}
			a, err := res.Answer()
			if err != nil {
				t.Fatal(err)
			}
			into := &corev1.Pod{}
			if err := json.Unmarshal([]byte(raw), into); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(a, into); err != nil {
				t.Fatalf("answer %s: %v", a, err)
			}
			if !maps.Equal(into.Labels, tc.labels) {
				t.Errorf("answer %s decoded into the request's Pod has labels %v, want %v", a, into.Labels, tc.labels)
			}
		})
	}
}
