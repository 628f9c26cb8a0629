package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/policy"
	"github.com/synchook/synchook/internal/undo"
)

// controlPlaneKey is the toleration key examples/policies/toleration-remove.yaml removes.
const controlPlaneKey = "node-role.kubernetes.io/control-plane"

// BenchmarkCostAgainstSize is the time per request against object size, a write
// (UpdatePhysical, sealed undo) and the read of its result (GetPhysical), for
//
//   - strip-toleration-0: a strip of /spec/tolerations/0 on 1k…64k tolerations;
//   - labels: a labels hook on a pod with 1k…100k labels;
//   - policy-toleration-remove: examples/policies/toleration-remove.yaml on 1k…16k tolerations
//     whose first has the control-plane key, in three parts: "total" (the policy as a hook),
//     "synchook" (the same chain with a Go hook that gives the same object: everything but
//     the CEL evaluation) and "cel" (the policy's function alone on a decoded Pod, as the
//     chain calls it). Above ~35,700 tolerations the policy exceeds its CEL cost limit.
//
// The ns/op divided by the object's KB (b.SetBytes: MB/s) should not grow with the size. With
// -short only the smallest object of each runs (what hack/test.sh does, so it cannot rot):
//
//	go test -run XXX -bench CostAgainstSize -benchtime 10x ./internal/engine/
func BenchmarkCostAgainstSize(b *testing.B) {
	ring, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	keys := undo.NewKeeper(ring)
	registry := func(h hooks.ClientHook) *engine.Registry {
		reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
		reg.MustRegister(h)
		return reg
	}
	writes := []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}
	strip, err := builtin.StripFunc(builtin.Strip{Paths: []string{"/spec/tolerations/0"}})
	if err != nil {
		b.Fatal(err)
	}
	stripReg := registry(hooks.NewFunc("strip", &corev1.Pod{}, writes, strip))
	l := builtin.Labels{Labels: map[string]string{"team": "a"}}
	labelsReg := registry(hooks.NewMetadataFunc("labels", &corev1.Pod{}, writes, builtin.LabelsFunc(l), builtin.LabelsMetadataFunc(l)))
	m, err := policy.ParseFile(filepath.Join("..", "..", "examples", "policies", "toleration-remove.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := policy.Compile(m, nil)
	if err != nil {
		b.Fatal(err)
	}
	cel, err := p.MutateFunc(hooks.UpdatePhysical)
	if err != nil {
		b.Fatal(err)
	}
	policyReg := registry(hooks.NewFunc("toleration-remove", &corev1.Pod{}, writes, cel))
	sameInGo := registry(hooks.NewFunc("toleration-remove", &corev1.Pod{}, writes, func(_ context.Context, o client.Object) (client.Object, error) {
		pod := o.(*corev1.Pod)
		pod.Spec.Tolerations = slices.DeleteFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == controlPlaneKey })
		return pod, nil
	}))

	sizes := func(ns ...int) []int {
		if testing.Short() {
			return ns[:1]
		}
		return ns
	}
	pod := func(tolerations, labels int) (*corev1.Pod, []byte) {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
		p.APIVersion, p.Kind, p.Name, p.Namespace = "v1", "Pod", "web", "ns"
		p.Labels = map[string]string{}
		for i := range labels {
			p.Labels[fmt.Sprintf("example.com/label-%06d", i)] = "value"
		}
		for i := range tolerations {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("key-%d", i), Operator: corev1.TolerationOpExists}) // ~36 bytes: 4k ≈ 143 KB
		}
		raw, _ := json.Marshal(p)
		return p, raw
	}
	// writeRead measures synchook's two requests, not the caller's apply of the write's patch
	// (kube-apiserver's work): the stored object is made once, before the loop (the sealed
	// undo is deterministic, so every write gives the same one).
	writeRead := func(reg *engine.Registry, raw []byte) func(b *testing.B) {
		return func(b *testing.B) {
			r := engine.NewRunner(reg, engine.RunnerOptions{})
			res, err := r.Mutate(b.Context(), podGVK, hooks.UpdatePhysical, raw)
			if err != nil {
				b.Fatal(err)
			}
			if res.Operations == 0 {
				b.Fatal("the hook changed nothing")
			}
			stored, err := res.Object()
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Mutate(b.Context(), podGVK, hooks.UpdatePhysical, raw); err != nil {
					b.Fatal(err)
				}
				if _, err := r.Mutate(b.Context(), podGVK, hooks.GetPhysical, stored); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for _, n := range sizes(1000, 4000, 16000, 64000) {
		_, raw := pod(n, 0)
		b.Run(fmt.Sprintf("strip-toleration-0/%dk-tolerations", n/1000), writeRead(stripReg, raw))
	}
	for _, n := range sizes(1000, 10000, 100000) {
		_, raw := pod(0, n)
		b.Run(fmt.Sprintf("labels/%dk-labels", n/1000), writeRead(labelsReg, raw))
	}
	for _, n := range sizes(1000, 4000, 16000) {
		typed, _ := pod(n, 0)
		typed.Spec.Tolerations[0].Key = controlPlaneKey
		raw, _ := json.Marshal(typed)
		name := fmt.Sprintf("policy-toleration-remove/%dk-tolerations/", n/1000)
		b.Run(name+"total", writeRead(policyReg, raw))
		b.Run(name+"synchook", writeRead(sameInGo, raw))
		b.Run(name+"cel", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				in := typed.DeepCopy()
				b.StartTimer()
				out, err := cel(b.Context(), in)
				if err != nil {
					b.Fatal(err)
				}
				if got := len(out.(*corev1.Pod).Spec.Tolerations); got != n-1 {
					b.Fatalf("%d tolerations after the policy, want %d", got, n-1)
				}
			}
		})
	}
}
