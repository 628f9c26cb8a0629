package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
)

// The typed path keeps only labels and annotations of the object before the hooks while the
// chain's last run changed nothing else, and a deep copy after a run that did. A hook that
// changes the spec of some objects and only labels of others must get the same answers in any
// order: every answer, applied to its request, gives exactly the object the hook made.
func TestTypedPathAnswersAlikeWhateverTheLastRunChanged(t *testing.T) {
	hook := func(_ context.Context, o client.Object) (client.Object, error) {
		p := o.(*corev1.Pod)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["tenant"] = "a"
		if p.Annotations["example.com/pin"] != "" {
			p.Spec.NodeName = p.Annotations["example.com/pin"]
			p.Spec.Containers[0].Image = "registry.example.com/pinned"
		}
		return p, nil
	}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("pin", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, hook))
	rn := engine.NewRunner(reg, engine.RunnerOptions{})
	for i, pin := range []string{"", "n1", "", "", "n2", "n3", "", "n4"} {
		pod := fixtures.Pod("ns", "web")
		if pin != "" {
			pod.Annotations["example.com/pin"] = pin
		}
		raw := fixtures.JSON(pod)
		res, err := rn.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Pod"), hooks.CreatePhysical, raw)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		out, err := res.Object()
		if err != nil {
			t.Fatalf("request %d: apply %s: %v", i, res.Patch, err)
		}
		got := &corev1.Pod{}
		if err := json.Unmarshal(out, got); err != nil {
			t.Fatal(err)
		}
		want := &corev1.Pod{}
		if err := json.Unmarshal(raw, want); err != nil {
			t.Fatal(err)
		}
		if _, err := hook(t.Context(), want); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("request %d (pin %q): patch %s gives another object than the hook made", i, pin, res.Patch)
		}
	}
}
