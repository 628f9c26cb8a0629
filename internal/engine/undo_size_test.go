package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
)

// TestUndoSizeIsTheChangeNotTheArray is a property test: for random edits of a random span of
// k tolerations (removed, inserted or replaced) at a random place in an array of N (1 to 2,000;
// 120 cases with a fixed seed), a write with undo (with a key and without) answers at most k
// operations plus the undo's, and an undo of at most a constant (the seal, the time a
// name-bound seal carries, and the length of the array the hooks wrote, undo.Entry.Len) plus twice the bytes of the
// changed tolerations — never in proportion to N or to what the edit shifts. The read gives
// the tolerations back.
func TestUndoSizeIsTheChangeNotTheArray(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 2026))
	type edit struct {
		kind    string
		at, k   int
		changed []corev1.Toleration // removed, inserted or the replaced ones' new values
	}
	toleration := func(prefix string, i int) corev1.Toleration {
		return corev1.Toleration{Key: fmt.Sprintf("%s-%d", prefix, i), Value: "v", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule}
	}
	var current edit
	reg := func(keyed bool) *engine.Registry {
		opts := engine.RegistryOptions{Keys: testKeeper(t), Undo: true}
		if keyed {
			opts.Keys = testKeeper(t)
		}
		r := engine.NewRegistryWithOptions(opts)
		r.MustRegister(hooks.NewFunc("edit", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
			p := o.(*corev1.Pod)
			ts := p.Spec.Tolerations
			switch e := current; e.kind {
			case "remove":
				p.Spec.Tolerations = slices.Delete(slices.Clone(ts), e.at, e.at+e.k)
			case "insert":
				p.Spec.Tolerations = slices.Insert(slices.Clone(ts), e.at, e.changed...)
			case "replace":
				p.Spec.Tolerations = slices.Replace(slices.Clone(ts), e.at, e.at+e.k, e.changed...)
			}
			return p, nil
		}))
		return r
	}
	regs := map[bool]*engine.Registry{false: reg(false), true: reg(true)}
	for i := range 120 {
		n := 1 + rng.IntN(2000)
		k := 1 + rng.IntN(min(n, 5))
		e := edit{kind: []string{"remove", "insert", "replace"}[rng.IntN(3)], at: rng.IntN(n - k + 1), k: k}
		p := decodePod(t, podJSON(t, map[string]string{"app": "web"}))
		for j := range n {
			p.Spec.Tolerations = append(p.Spec.Tolerations, toleration("t", j))
		}
		if e.kind == "remove" {
			e.changed = p.Spec.Tolerations[e.at : e.at+k]
		} else {
			for j := range k {
				e.changed = append(e.changed, toleration("new", i*10+j))
			}
		}
		current = e
		changedBytes, _ := json.Marshal(e.changed)
		raw, _ := json.Marshal(p)
		keyed := i%2 == 0
		res, err := regs[keyed].Mutate(t.Context(), podGVK, hooks.UpdatePhysical, raw)
		if err != nil {
			t.Fatalf("case %d (%s %d at %d of %d): %v", i, e.kind, k, e.at, n, err)
		}
		stored, err := res.Object()
		if err != nil {
			t.Fatal(err)
		}
		u := decodePod(t, stored).Annotations[undo.Annotation]
		if res.Operations > k+2 || len(u) > 360+2*len(changedBytes) {
			t.Fatalf("case %d (%s %d at %d of %d, key %v): %d operations and an undo of %d bytes for %d changed bytes",
				i, e.kind, k, e.at, n, keyed, res.Operations, len(u), len(changedBytes))
		}
		if view := decodePod(t, mutatedOK(t, regs[keyed], hooks.GetPhysical, stored)); !equalJSON(t, view.Spec.Tolerations, p.Spec.Tolerations) {
			t.Fatalf("case %d (%s %d at %d of %d): the read does not give the tolerations back", i, e.kind, k, e.at, n)
		}
	}
}
