// Package vcluster holds end-to-end tests that load synchook through vcluster's own plugin v2
// manager (github.com/loft-sh/vcluster/pkg/plugin/v2, v0.36.1), the way a vcluster syncer
// does: the binary is copied to <plugin folder>/<name>/plugin, the manager starts it with
// go-plugin (PLUGIN_CONFIG from vConfig.Plugins[<name>].Config), calls Initialize and
// GetPluginConfig, registers the client hooks and calls Mutate from MutateObject, which
// json.Unmarshals the answer INTO the object it sent. No kube-apiserver is needed.
//
// It also benchmarks synchook against two reference plugins built from this module, under the
// same manager: internal/sdkplugin (what a vcluster-sdk plugin does per call: decode into a
// typed Pod, set a label, encode; optionally hide it again on GetPhysical) and
// internal/echoplugin (answers the object back, the floor; its hook types configurable).
//
// v1_test.go does the same for synchook's legacy plugin v1 bridge under vcluster's own plugin
// v1 manager (github.com/loft-sh/vcluster/pkg/plugin/v1): the manager serves remote.VCluster on
// a free loopback port and waits in Start until every name in options.Plugins has registered;
// synchook runs as a sidecar process (`synchook serve --plugin-address ... --vcluster-address
// ...`, hook config in SYNCHOOK_CONFIG) and registers with it. MutateObject then dials the
// registered address for every call and json.Unmarshals the answer into the object it sent.
// TestV1Throughput compares it with the sdk-style v1 plugin internal/sdkpluginv1, also a
// process of its own.
//
// syncer_test.go goes further: vcluster's real syncer (its start sequence from setup, the
// chart's default values plus plugins: from the repository's plugin.yaml) runs between two
// envtest kube-apiservers, "host" and "virtual", in a copy of the test binary, and loads the
// built synchook from its plugin folder; the tests assert on both apiservers (translation with
// the hooks' changes; undo under vcluster's bidirectional metadata sync, checked on every
// recorded event of the virtual objects until they settle, not on one read; strip and policy:
// hooks; synchook's request counts per kind and hook type; no update in a 30 s window; a
// failing hook and recovery; tenant-forged annotations) and, without undo, that vcluster does
// copy the hook's labels into the tenant's pod. The syncer process runs vcluster's plugin v2
// manager only (v2OnlyManager: vcluster's own DefaultManager also starts the v1 server on the
// fixed localhost:10099), and an envtest start that lost its suggested port to another process
// is tried again on fresh ports, so two runs of the suite on one machine do not collide.
// TestVClusterSyncerThroughput measures synced pods per second and CPU per synced pod
// (syncer, plugins, both apiservers and etcds) for no plugin, sdk-style plugins, an echo floor
// and synchook, interleaved over rounds (BENCHMARKS.md). They need KUBEBUILDER_ASSETS
// (hack/envtest-assets.sh) and are skipped without it.
//
//	KUBEBUILDER_ASSETS=$(../../hack/envtest-assets.sh | tail -n 1) go test -run TestVClusterSyncer -v
//	SYNCHOOK_NO_LOOP_WINDOW=8s ...                                        # a shorter no-loop window (default 30s)
//	SYNCHOOK_BENCH=1 go test -run TestVClusterSyncerThroughput -v -timeout 60m
//	    # SYNCHOOK_BENCH_PODS (500), SYNCHOOK_BENCH_ROUNDS (5), SYNCHOOK_BENCH_VARIANTS=c,f,
//	    # SYNCHOOK_BENCH_PROFILE=dir (CPU profiles of the syncer and synchook)
//
// This is a separate module on purpose: vcluster's dependency graph clashes with synchook's,
// so it never imports github.com/synchook/synchook; the tests build the repository root with
// `go build` (CGO_ENABLED=0, -buildvcs=false) once per test binary run, or load the binary
// named by SYNCHOOK_BINARY. SYNCHOOK_REPO overrides the repository (default ../..).
//
//	cd e2e/vcluster
//	go vet ./... && go test -count=1 ./...
//	go test -run XXX -bench . -benchtime 2s                               # BenchmarkV2MutatePod
//	SYNCHOOK_BENCH=1 go test -run TestV2Throughput -v                    # interleaved ops/s, ratios, CPU per call
//	    # SYNCHOOK_BENCH_PERF=dir: perf record of each plugin and vcluster's side (Linux perf)
//	SYNCHOOK_BENCH=1 go test -run TestV1Throughput -v                    # the same for plugin v1
//
// go.sum was written with GONOSUMDB=github.com/loft-sh: four of vcluster's loft-sh
// dependencies (api/v4 and agentapi/v4 v4.11.0-rc.1, admin-apis, external-types) were not in
// the checksum database the module proxy serves; with go.sum present no lookup is needed.
package vcluster
