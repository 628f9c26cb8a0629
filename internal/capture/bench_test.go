package capture_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/undo"
)

// BenchmarkCaptureAndProvenance is what capture (at 1 % and at 100 % of requests) and
// provenance add to one CreatePhysical chain of the ~5 KiB Pod with a config labels hook, as
// the sidecar runs it (undo on), against the same chain without either, in the same run.
//
//	go test -run XXX -bench CaptureAndProvenance -benchmem ./capture/
func BenchmarkCaptureAndProvenance(b *testing.B) {
	cfg, err := config.Parse([]byte("hooks:\n  - name: tenant\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {synchook.io/tenant: a}}\n"))
	if err != nil {
		b.Fatal(err)
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	registry := func(provenance bool) *engine.Registry {
		reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring), Provenance: provenance, Version: "bench"})
		if err := cfg.Build(reg); err != nil {
			b.Fatal(err)
		}
		return reg
	}
	capturing := func(reg *engine.Registry, sample float64) engine.CaptureFunc {
		w, err := capture.New(capture.Options{Dir: b.TempDir(), Sample: sample, Registry: reg})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go w.Run(ctx)
		b.Cleanup(func() { cancel(); _ = w.Close() })
		return w.Capture
	}
	raw := fixtures.JSON(fixtures.Pod("ns", "web"))
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	plain, prov := registry(false), registry(true)
	for _, bc := range []struct {
		name string
		rn   *engine.Runner
	}{
		{"plain", engine.NewRunner(plain, engine.RunnerOptions{})},
		{"capture-1%", engine.NewRunner(plain, engine.RunnerOptions{Capture: capturing(plain, 0.01)})},
		{"capture-100%", engine.NewRunner(plain, engine.RunnerOptions{Capture: capturing(plain, 1)})},
		{"provenance", engine.NewRunner(prov, engine.RunnerOptions{})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res, err := bc.rn.Mutate(b.Context(), gvk, hooks.CreatePhysical, raw); err != nil || res.Patch == nil {
					b.Fatal(res, err)
				}
			}
		})
	}
}
