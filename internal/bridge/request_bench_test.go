package bridge_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/undo"
)

// requestVariants are the requests of BenchmarkRequest: each a hook (a Go hook or config) on
// the ~5 KiB benchmark Pod, its write (CreatePhysical) and the read of what it wrote
// (GetPhysical, which takes the change off with the sealed undo).
var requestVariants = []struct {
	name   string
	config string
	typed  bool
}{
	{name: "typed", typed: true}, // a Go hook that changes spec (nodeSelector), as a ported vcluster-sdk hook does
	{name: "strip", config: "hooks:\n  - name: strip\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical, UpdatePhysical]\n    strip: {paths: [/spec/schedulerName]}\n"},
	{name: "labels", config: "hooks:\n  - name: labels\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical, UpdatePhysical]\n    labels: {labels: {vcluster.example.com/tenant: team-a}}\n"},
}

// requestMutator returns a Mutator over a registry as the binary builds it (undo on, sealed
// with a fresh key) holding variant i's hook.
func requestMutator(b *testing.B, i int) *bridge.Mutator {
	b.Helper()
	ring, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
	v := requestVariants[i]
	if v.typed {
		reg.MustRegister(hooks.Typed("node-pool", []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, func(_ context.Context, p *corev1.Pod) error {
			if p.Spec.NodeSelector == nil {
				p.Spec.NodeSelector = map[string]string{}
			}
			p.Spec.NodeSelector["pool"] = "tenants"
			return nil
		}))
	} else {
		cfg, err := config.Parse([]byte(v.config))
		if err != nil {
			b.Fatal(err)
		}
		if err := cfg.Build(reg); err != nil {
			b.Fatal(err)
		}
	}
	reg.CoverUndoReads([]undo.Kind{{GVK: corev1.SchemeGroupVersion.WithKind("Pod"), Side: undo.Physical}})
	m, err := bridge.NewMutator(engine.NewRunner(reg, engine.RunnerOptions{}), bridge.MutatorOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkRequest is one request of the v2 plugin's own work (bridge.Mutator, as
// internal/bridgev2 calls it, without gRPC) on the ~5 KiB Pod with a sealed undo: per hook
// variant the write and the read back, and "floor", a typed decode + encode of the same Pod
// (what an sdk-style plugin's own work costs). Compare each to the floor of the same run:
//
//	go test -run '^$' -bench BenchmarkRequest -count 5 ./internal/bridge/ | benchstat -col /op -
func BenchmarkRequest(b *testing.B) {
	raw := fixtures.JSON(fixtures.Pod("ns", "web"))
	object := string(raw)
	b.Run("floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pod := &corev1.Pod{}
			if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(pod); err != nil {
				b.Fatal(err)
			}
		}
	})
	for i, v := range requestVariants {
		m := requestMutator(b, i)
		answer, mutated, err := m.Mutate(b.Context(), "v1", "Pod", "CreatePhysical", object)
		if err != nil || !mutated {
			b.Fatalf("%s: write: mutated %v, %v", v.name, mutated, err)
		}
		written := asVCluster(b, object, answer) // the host object, which the read gets
		if read, mutated, err := m.Mutate(b.Context(), "v1", "Pod", "GetPhysical", written); err != nil || !mutated || !readsBack(b, written, read, object) {
			b.Fatalf("%s: the read does not give the object back (mutated %v, %v)", v.name, mutated, err)
		}
		for _, op := range []struct{ name, hookType, object string }{{"write", "CreatePhysical", object}, {"read", "GetPhysical", written}} {
			b.Run(v.name+"/"+op.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, mutated, err := m.Mutate(b.Context(), "v1", "Pod", op.hookType, op.object); err != nil || !mutated {
						b.Fatal(mutated, err)
					}
				}
			})
		}
	}
}

// asVCluster returns the JSON of the Pod that vcluster holds after it decoded answer into the
// Pod it sent (request), as its v2 plugin manager does, and encoded it again.
func asVCluster(b *testing.B, request, answer string) string {
	b.Helper()
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(request), pod); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal([]byte(answer), pod); err != nil {
		b.Fatal(err)
	}
	out, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	return string(out)
}

// readsBack reports whether the answer read, decoded as vcluster does (into the object it sent,
// written), gives the object before the write, want.
func readsBack(b *testing.B, written, read, want string) bool {
	b.Helper()
	return asVCluster(b, written, read) == asVCluster(b, want, want)
}
