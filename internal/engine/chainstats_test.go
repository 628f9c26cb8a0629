package engine

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/patch"
)

// TestTheLightCompareIsTheRunnersGuessAndNeverChangesAResult runs a Go hook that changes only a
// label on some calls and spec on others through two Runners of one Registry: each Runner
// keeps its own statistics (one's runs never change how the other compares), and every
// result, whichever compare made it, applies to the request as the hook's change alone.
func TestTheLightCompareIsTheRunnersGuessAndNeverChangesAResult(t *testing.T) {
	spec := false
	reg := NewRegistry(nil)
	reg.MustRegister(hooks.Typed("flip", []hooks.HookType{hooks.CreatePhysical}, func(_ context.Context, p *corev1.Pod) error {
		p.Labels["team"] = "a"
		if spec {
			p.Spec.NodeSelector = map[string]string{"pool": "x"}
		}
		return nil
	}))
	c := reg.chains[Key{GVK: corev1.SchemeGroupVersion.WithKind("Pod"), Type: hooks.CreatePhysical}]
	busy, quiet := NewRunner(reg, RunnerOptions{}), NewRunner(reg, RunnerOptions{})
	raw := fixtures.JSON(fixtures.Pod("ns", "web"))
	run := func(rn *Runner) {
		t.Helper()
		res, err := rn.Mutate(t.Context(), c.key.GVK, c.key.Type, raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := patch.Apply(raw, res.Patch)
		if err != nil {
			t.Fatal(err)
		}
		want := fixtures.Pod("ns", "web")
		want.Labels["team"] = "a"
		if spec {
			want.Spec.NodeSelector = map[string]string{"pool": "x"}
		}
		var gotPod corev1.Pod
		if err := json.Unmarshal(got, &gotPod); err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(&gotPod)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Fatalf("spec %v: patched object\n%s\nwant\n%s", spec, g, w)
		}
	}
	run(busy)
	if busy.statsOf(c).changedMore.Load() {
		t.Fatal("a run that changed a label made the next run compare the whole object")
	}
	spec = true
	run(busy) // light: finds more, compares the whole object
	if !busy.statsOf(c).changedMore.Load() {
		t.Fatal("a run that changed spec left the light compare on")
	}
	if quiet.statsOf(c).changedMore.Load() {
		t.Fatal("one Runner's run changed how another compares")
	}
	run(busy) // full
	spec = false
	for range lightAfter {
		run(busy) // full, maps only
	}
	if busy.statsOf(c).changedMore.Load() {
		t.Fatalf("%d runs in a row that changed only a label left the whole compare on", lightAfter)
	}
	run(busy)
	run(quiet)
}
