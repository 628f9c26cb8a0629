package bridge_test

import (
	"testing"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/undo"
)

// BenchmarkBridgeServerWork is the bridge's own work per Mutate call, without the network: the
// ~5 KiB Pod and one config labels hook, as in the load command. BENCHMARKS.md keeps the top of
// its CPU profile (go test -run XXX -bench BridgeServerWork -cpuprofile cpu.out ./bridge/).
func BenchmarkBridgeServerWork(b *testing.B) {
	cfg, err := config.Parse([]byte("hooks:\n  - name: bench-label\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {synchook.io/bench: \"true\"}}\n"))
	if err != nil {
		b.Fatal(err)
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)}) // as the binary runs
	if err := cfg.Build(reg); err != nil {
		b.Fatal(err)
	}
	br, err := bridge.New(engine.NewRunner(reg, engine.RunnerOptions{}), bridge.Options{Address: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	req := &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: string(fixtures.JSON(fixtures.Pod("ns", "web")))}
	b.Run("CreatePhysical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if res, err := br.Mutate(b.Context(), req); err != nil || !res.GetMutated() {
				b.Fatal(res, err)
			}
		}
	})
	// The read back of what CreatePhysical wrote: the sealed undo opened and applied.
	hooked, err := br.Mutate(b.Context(), req)
	if err != nil {
		b.Fatal(err)
	}
	read := &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "GetPhysical", Object: hooked.GetObject()}
	b.Run("GetPhysical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if res, err := br.Mutate(b.Context(), read); err != nil || !res.GetMutated() {
				b.Fatal(res, err)
			}
		}
	})
}
