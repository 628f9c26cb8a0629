package engine_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// BenchmarkUndoRead is the read that takes a sealed undo off a ~5 KiB Pod (GetPhysical, no
// read hooks): "labels" through the label/annotation fast path, "toleration" through the
// general path (a typed hook's spec change), "strip-tolerations" the general path with every
// element inserted again into a list the write emptied. It uses only what every build since sealing
// exports, so the same file measures an older tree too.
func BenchmarkUndoRead(b *testing.B) {
	ring, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	labels := builtin.Labels{Labels: map[string]string{"team": "a"}}
	writes := []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}
	for _, v := range []struct {
		name string
		hook hooks.ClientHook
	}{
		{"labels", hooks.NewMetadataFunc("labels", &corev1.Pod{}, writes, builtin.LabelsFunc(labels), builtin.LabelsMetadataFunc(labels))},
		{"toleration", hooks.NewFunc("toleration", &corev1.Pod{}, writes, func(_ context.Context, o client.Object) (client.Object, error) {
			p := o.(*corev1.Pod)
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpExists})
			return p, nil
		})},
		{"strip-tolerations", hooks.NewFunc("strip-tolerations", &corev1.Pod{}, writes, func(_ context.Context, o client.Object) (client.Object, error) {
			p := o.(*corev1.Pod)
			p.Spec.Tolerations = nil // the whole list: the read makes it again
			return p, nil
		})},
	} {
		reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
		reg.MustRegister(v.hook)
		raw := fixtures.JSON(fixtures.Pod("ns", "web"))
		res, err := reg.Mutate(context.Background(), podGVK, hooks.CreatePhysical, raw)
		if err != nil {
			b.Fatal(err)
		}
		stored, err := patch.Apply(raw, res.Patch)
		if err != nil {
			b.Fatal(err)
		}
		r := engine.NewRunner(reg, engine.RunnerOptions{})
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res, err := r.Mutate(context.Background(), podGVK, hooks.GetPhysical, stored); err != nil || res.Patch == nil {
					b.Fatal("the read took nothing off", err)
				}
			}
		})
	}
}
