package bench_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/config"
	_ "github.com/synchook/synchook/config/policy" // policy hooks, as the synchook binary links them
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undo"
)

// sizeN is the smaller object of BenchmarkSize: a Pod with this many tolerations; the larger
// has four times as many.
var sizeN = flag.Int("size.n", 8000, "BenchmarkSize: tolerations of the smaller Pod (the larger has 4×)")

// controlPlaneKey is the toleration key examples/policies/toleration-remove.yaml removes.
const controlPlaneKey = "node-role.kubernetes.io/control-plane"

// applyConfigPolicy returns a MutatingAdmissionPolicy (flow YAML) named name whose one
// mutation is an ApplyConfiguration of expression, on Pods, CREATE and UPDATE.
func applyConfigPolicy(name, expression string) string {
	return `{apiVersion: admissionregistration.k8s.io/v1, kind: MutatingAdmissionPolicy, metadata: {name: ` + name + `},
  spec: {reinvocationPolicy: Never,
    matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]},
    mutations: [{patchType: ApplyConfiguration, applyConfiguration: {expression: '` + expression + `'}}]}}`
}

// sizePaths are the paths of BenchmarkSize: each a config (one hook on Pods, CreatePhysical and
// UpdatePhysical, as `synchook mutate --config` loads it) or, for "typed", a Go hook.
var sizePaths = []struct {
	name, hook string
	maxN       int // the largest smaller object (0: -size.n) whose 4× the CEL cost budget allows
}{
	{name: "labels", hook: `labels: {labels: {team: a}}`},
	{name: "strip", hook: `strip: {paths: [/spec/tolerations/0]}`},
	// One field in every element: the walk is over all n, the change (and so the undo) is the
	// first element's tolerationSeconds.
	{name: "wildcard-strip", hook: `strip: {paths: [/spec/tolerations/*/tolerationSeconds]}`},
	// A field of every element removed: undo off, as the undo of n removals is larger than an
	// undo may be (undo.ErrTooLarge).
	{name: "wildcard-strip-all", hook: `undo: false, strip: {paths: [/spec/tolerations/*/operator]}`},
	{name: "image", hook: `image: {rules: [{from: docker.io, to: registry.internal/dockerhub}]}`},
	{name: "typed", hook: ""},
	{name: "policy-jsonpatch", hook: `policyFile: POLICYFILE`},
	// examples/policies/env-merge.yaml's expression: a list (the containers, each with a list
	// of env) merged into the object.
	{name: "policy-applyconfiguration", hook: `policy: ` + applyConfigPolicy("env-merge", `Object{spec: Object.spec{containers: object.spec.containers.map(c,
      Object.spec.containers{name: c.name, env: [Object.spec.containers.env{name: "TZ", value: "UTC"}]})}}`)},
	// A list as long as the object's: an env var per toleration (the tolerations are an atomic
	// list, which an ApplyConfiguration may not change; env is a map-list, merged by name).
	// Undo off: the undo of n env vars is larger than an undo may be. n is at most 4,000: the
	// CEL cost budget (1,000,000 per expression, as kube-apiserver) refuses it between 16,000
	// and 20,000 tolerations.
	{name: "policy-applyconfiguration-n", hook: `undo: false, policy: ` + applyConfigPolicy("env-per-toleration", `Object{spec: Object.spec{containers: [Object.spec.containers{name: "web",
      env: object.spec.tolerations.map(t, Object.spec.containers.env{name: t.key, value: t.operator})}]}}`), maxN: 4000},
}

// sizePod returns the JSON of a Pod named web in ns with one container (docker.io's nginx) and
// n tolerations: the first has the control-plane key and tolerationSeconds, the others
// {"key":"key-<i>","operator":"Exists"}.
func sizePod(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ns","labels":{"app":"web"}},` +
		`"spec":{"containers":[{"name":"web","image":"nginx:1.27"}],"tolerations":[`)
	fmt.Fprintf(&b, `{"key":%q,"operator":"Exists","effect":"NoExecute","tolerationSeconds":300}`, controlPlaneKey)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `,{"key":"key-%d","operator":"Exists"}`, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// nodeSelectorHook is the typed Go hook: the vcluster SDK's MutateCreatePhysical shape,
// setting spec.nodeSelector on the decoded Pod.
func nodeSelectorHook(_ context.Context, obj client.Object) (client.Object, error) {
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	pod.Spec.NodeSelector["example.com/pool"] = "tenants"
	return pod, nil
}

// sizeRegistry returns the registry of one path of BenchmarkSize, built the way `synchook
// mutate` builds its own (sidecar.RegistryOf: automatic undo on, sealed with keys, the
// idempotency check on the built-in samples).
func sizeRegistry(b *testing.B, name, hook string, keys *undo.Keeper) *engine.Registry {
	b.Helper()
	policyFile, err := filepath.Abs(filepath.Join("..", "..", "examples", "policies", "toleration-remove.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	cfg := &config.Config{}
	var register func(*engine.Registry) error
	if hook == "" {
		register = func(reg *engine.Registry) error {
			return reg.Register(hooks.NewFunc(name, &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, nodeSelectorHook))
		}
	} else {
		hook = strings.ReplaceAll(hook, "POLICYFILE", policyFile)
		if cfg, err = config.Parse([]byte(`{hooks: [{name: ` + name + `, resources: [{apiVersion: v1, kind: Pod}], types: [CreatePhysical, UpdatePhysical], ` + hook + `}]}`)); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
	}
	reg, err := sidecar.RegistryOf(b.Context(), cfg, sidecar.RegistryConfig{Keys: keys, Register: register})
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return reg
}

// BenchmarkSize is issue 55's cost against size: every path's write (UpdatePhysical, and the
// resulting object as `synchook mutate` prints it) and read (GetPhysical of that result, sealed
// undo) on a Pod of n and 4n tolerations (-size.n, default 8,000; the CEL cost limit refuses
// toleration-remove.yaml between 52,000 and 56,000 of them). Linear: the CPU time of 4n is at
// most ~4× that of n (issue 55: ≤ 4.6); cpu-ns/op is the process's CPU time per op (the
// collector included), steadier than ns/op on a shared machine. hack/bench-size.sh runs it in
// interleaved rounds and prints the ratios. With -short n is 100 (so that it cannot rot):
//
//	go test -run XXX -bench BenchmarkSize -benchtime 3x ./internal/bench/
func BenchmarkSize(b *testing.B) {
	n := *sizeN
	if testing.Short() {
		n = 100
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	keys := undo.NewKeeper(ring)
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	for _, p := range sizePaths {
		n := n
		if p.maxN > 0 && n > p.maxN {
			n = p.maxN
		}
		b.Run(p.name, func(b *testing.B) {
			reg := sizeRegistry(b, p.name, p.hook, keys)
			for _, size := range []int{n, 4 * n} {
				raw := sizePod(size)
				b.Run(fmt.Sprintf("write/n=%d", size), sizeLoop(reg, podGVK, hooks.UpdatePhysical, raw))
				b.Run(fmt.Sprintf("read/n=%d", size), func(b *testing.B) {
					// The read is of what the write stored.
					res, err := reg.Mutate(b.Context(), podGVK, hooks.UpdatePhysical, raw)
					if err != nil {
						b.Fatal(err)
					}
					stored, err := res.Object()
					if err != nil {
						b.Fatal(err)
					}
					sizeLoop(reg, podGVK, hooks.GetPhysical, stored)(b)
				})
			}
		})
	}
}

// sizeLoop returns the benchmark of one request of type t on raw through reg, reporting
// cpu-ns/op; a write (not t.Reads()) also makes the resulting object, and must change the
// object.
func sizeLoop(reg *engine.Registry, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) func(*testing.B) {
	return func(b *testing.B) {
		write := !t.Reads()
		if write {
			if res, err := reg.Mutate(b.Context(), gvk, t, raw); err != nil {
				b.Fatal(err)
			} else if res.Patch == nil {
				b.Fatal("the hook changed nothing")
			}
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		// The label marks the loop's samples in a CPU profile (and those of the goroutines it
		// starts: the hooks run on their own), apart from the setup: -tagfocus size=loop.
		ctx := pprof.WithLabels(b.Context(), pprof.Labels("size", "loop"))
		pprof.SetGoroutineLabels(ctx)
		defer pprof.SetGoroutineLabels(b.Context())
		start := processCPU(b)
		for b.Loop() {
			res, err := reg.Mutate(ctx, gvk, t, raw)
			if err != nil {
				b.Fatal(err)
			}
			if write {
				if _, err := res.Object(); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

// processCPU returns the user and system CPU time this process has used, in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
