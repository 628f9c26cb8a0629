package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/undo"
)

// TestTheReadOfAReplacedArrayElementGivesTheElementBack: a hook that replaces one element of an
// array (a container's args) is taken off on the read by putting the element back in its
// place, not by inserting it next to the hook's.
func TestTheReadOfAReplacedArrayElementGivesTheElementBack(t *testing.T) {
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
	reg.MustRegister(hooks.Typed("args", []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, func(_ context.Context, p *corev1.Pod) error {
		p.Spec.Containers[0].Args[1] = "9999"
		return nil
	}))
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	raw := fixtures.JSON(fixtures.Pod("ns", "web"))
	res, err := reg.Mutate(context.Background(), gvk, hooks.CreatePhysical, raw)
	if err != nil {
		t.Fatal(err)
	}
	written, err := res.Object()
	if err != nil {
		t.Fatal(err)
	}
	read, err := reg.Mutate(context.Background(), gvk, hooks.GetPhysical, written)
	if err != nil {
		t.Fatal(err)
	}
	back, err := read.Object()
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(back, &got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"--port", "8080", "--log-level=info"}; len(got.Spec.Containers[0].Args) != 3 || got.Spec.Containers[0].Args[1] != "8080" {
		t.Fatalf("the read gives args %q, want %q", got.Spec.Containers[0].Args, want)
	}
}
