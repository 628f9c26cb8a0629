package engine_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

func TestProvenanceNamesEveryHookThatChangedTheObjectAndComesOffOnTheWayBack(t *testing.T) {
	set := func(key string) hooks.MutateFunc {
		return func(_ context.Context, o client.Object) (client.Object, error) {
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[key] = "v"
			o.SetLabels(l)
			return o, nil
		}
	}
	noop := func(_ context.Context, o client.Object) (client.Object, error) { return o, nil }
	// A key: the chains are CreatePhysical only, and a clear-text undo is never trusted on
	// such a kind (a tenant's update would bring its own past synchook).
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Provenance: true, Version: "v1.2.3", Keys: testKeeper(t)})
	reg.MustRegister(
		hooks.NewFunc("first", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, set("a")),
		hooks.NewFunc("idle", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, noop),
		hooks.NewFunc("second", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, set("b")),
	)
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	res, err := reg.Mutate(t.Context(), gvk, hooks.CreatePhysical, raw)
	if err != nil {
		t.Fatal(err)
	}
	hooked, err := patch.Apply(raw, res.Patch)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(hooked, &pod); err != nil {
		t.Fatal(err)
	}
	got := pod.Annotations[undo.ProvenanceAnnotation]
	if !regexp.MustCompile(`^first@v1\.2\.3#[0-9a-f]{8},second@v1\.2\.3#[0-9a-f]{8}$`).MatchString(got) {
		t.Errorf("%s = %q, want first and second (not idle) as hook@version#sha", undo.ProvenanceAnnotation, got)
	}
	back, err := reg.Mutate(t.Context(), gvk, hooks.GetPhysical, hooked)
	if err != nil {
		t.Fatal(err)
	}
	final, err := patch.Apply(hooked, back.Patch)
	if err != nil {
		t.Fatal(err)
	}
	var after corev1.Pod
	if err := json.Unmarshal(final, &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Annotations) != 0 || len(after.Labels) != 0 {
		t.Errorf("on the way back: annotations %v labels %v, want none (the syncer never sees provenance)", after.Annotations, after.Labels)
	}
}

// Regression (issue 21, seen with vcluster's real syncer): a read chain marked its view with
// synchook.io/mutated-by, and vcluster copied the mark into the virtual object; a write to the
// virtual cluster marked the tenant's object itself.
func TestProvenanceMarksHostWritesOnly(t *testing.T) {
	strip := func(_ context.Context, o client.Object) (client.Object, error) {
		o.(*corev1.Pod).Spec.NodeName = ""
		return o, nil
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true, Provenance: true})
	reg.MustRegister(hooks.NewFunc("strip-node", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical, hooks.GetVirtual, hooks.CreateVirtual, hooks.UpdateVirtual}, strip))
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"nodeName":"n1"}}`)
	for _, read := range []hooks.HookType{hooks.GetPhysical, hooks.GetVirtual, hooks.CreateVirtual, hooks.UpdateVirtual} {
		res, err := reg.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Pod"), read, raw)
		if err != nil {
			t.Fatal(err)
		}
		if res.Patch == nil || regexp.MustCompile(`mutated-by`).Match(res.Patch) {
			t.Errorf("%s patch %s: want the strip and no provenance mark", read, res.Patch)
		}
	}
}

// Regression (issue 21, seen with vcluster's real syncer and plugin.yaml): with provenance on,
// the start-up idempotency check called a labels chain not idempotent, because its second run
// drops the provenance mark of the first (its hooks change nothing more).
func TestTheIdempotencyCheckAcceptsAChainWithProvenance(t *testing.T) {
	labels := func(_ context.Context, o client.Object) (client.Object, error) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["synchook.io/hooked"] = "true"
		o.SetLabels(l)
		return o, nil
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true, Provenance: true})
	reg.MustRegister(hooks.NewFunc("pod-labels", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, labels))
	samples := func(schema.GroupVersionKind) [][]byte {
		return [][]byte{[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"a":"b"}}}`)}
	}
	if err := reg.CheckIdempotent(t.Context(), samples); err != nil {
		t.Errorf("CheckIdempotent: %v", err)
	}
}
