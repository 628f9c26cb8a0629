package engine_test

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
)

// BenchmarkCostAgainstSize is the time per request against object size, a write
// (UpdatePhysical, sealed undo) and the read of its result (GetPhysical), for a strip of
// /spec/tolerations/0 on 1k…64k tolerations and a labels hook on a pod with 1k…100k labels.
// The ns/op divided by the object's KB (b.SetBytes: MB/s) should not grow with the size:
//
//	go test -run XXX -bench CostAgainstSize -benchtime 20x ./internal/engine/
func BenchmarkCostAgainstSize(b *testing.B) {
	ring, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	keys := undo.NewKeeper(ring)
	strip, err := builtin.StripFunc(builtin.Strip{Paths: []string{"/spec/tolerations/0"}})
	if err != nil {
		b.Fatal(err)
	}
	stripReg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
	stripReg.MustRegister(hooks.NewFunc("strip", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, strip))
	l := builtin.Labels{Labels: map[string]string{"team": "a"}}
	labelsReg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
	labelsReg.MustRegister(hooks.NewMetadataFunc("labels", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, builtin.LabelsFunc(l), builtin.LabelsMetadataFunc(l)))

	pod := func(tolerations, labels int) []byte {
		p := corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
		p.APIVersion, p.Kind, p.Name, p.Namespace = "v1", "Pod", "web", "ns"
		p.Labels = map[string]string{}
		for i := range labels {
			p.Labels[fmt.Sprintf("example.com/label-%06d", i)] = "value"
		}
		for i := range tolerations {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("key-%d", i), Operator: corev1.TolerationOpExists}) // ~36 bytes: 4k ≈ 143 KB
		}
		raw, _ := json.Marshal(&p)
		return raw
	}
	cases := []struct {
		name string
		reg  *engine.Registry
		raw  []byte
	}{}
	for _, n := range []int{1000, 4000, 16000, 64000} {
		cases = append(cases, struct {
			name string
			reg  *engine.Registry
			raw  []byte
		}{fmt.Sprintf("strip-toleration-0/%dk-tolerations", n/1000), stripReg, pod(n, 0)})
	}
	for _, n := range []int{1000, 10000, 100000} {
		cases = append(cases, struct {
			name string
			reg  *engine.Registry
			raw  []byte
		}{fmt.Sprintf("labels/%dk-labels", n/1000), labelsReg, pod(0, n)})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := engine.NewRunner(c.reg, engine.RunnerOptions{})
			b.SetBytes(int64(len(c.raw)))
			b.ReportAllocs()
			for b.Loop() {
				res, err := r.Mutate(b.Context(), podGVK, hooks.UpdatePhysical, c.raw)
				if err != nil {
					b.Fatal(err)
				}
				stored, err := res.Object()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Mutate(b.Context(), podGVK, hooks.GetPhysical, stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
