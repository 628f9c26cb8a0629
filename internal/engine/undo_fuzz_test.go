package engine_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/hoststore"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// undoRegistry has, with automatic undo on, one write chain per shape of hook — labels (the
// fast path), strip (typed), a Go hook that edits the spec (JSON-patch-like: adds a toleration,
// sets a node selector, drops the first container's env) and all three in one chain — and no
// Get hooks at all.
func undoRegistry(f *testing.F, keys *undo.Keeper) *engine.Registry {
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
	labels := builtin.Labels{Labels: map[string]string{"synchook.io/tenant": "a", "app": "overwritten"}, Annotations: map[string]string{"synchook.io/owner": "platform"}}
	strip := builtin.Strip{Paths: []string{"/spec/nodeName", "/metadata/labels/host-only", "/spec/containers/0/resources"}}
	stripFn, err := builtin.StripFunc(strip)
	if err != nil {
		f.Fatal(err)
	}
	spec := func(_ context.Context, o client.Object) (client.Object, error) {
		p := o.(*corev1.Pod)
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpExists})
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector["pool"] = "tenants"
		if len(p.Spec.Containers) > 0 {
			p.Spec.Containers[0].Env = nil
		}
		return p, nil
	}
	pod := &corev1.Pod{}
	reg.MustRegister(
		hooks.NewMetadataFunc("labels", pod, []hooks.HookType{hooks.CreatePhysical, hooks.UpdateVirtual}, builtin.LabelsFunc(labels), builtin.LabelsMetadataFunc(labels)),
		hooks.NewFunc("strip", pod, []hooks.HookType{hooks.UpdatePhysical, hooks.UpdateVirtual}, stripFn),
		hooks.NewFunc("spec", pod, []hooks.HookType{hooks.CreateVirtual, hooks.UpdateVirtual}, spec),
	)
	return reg
}

// FuzzUndo proves automatic undo against a tenant who chooses the synchook.io/undo value:
//   - for any Pod x, carrying the tenant's value or not, and every write chain, the paired Get
//     (with no Get hook registered) gives back exactly the object the syncer sent —
//     GetPhysical(CreatePhysical(x)) == x — and the write never stores the tenant's value as
//     it was written;
//   - for any stored Pod s that carries the tenant's value (forged on the host or virtual
//     object), the view the paired Get hands on has the identity of s (apiVersion, kind, name,
//     namespace, uid), and either is s itself or is mapped back onto s exactly by one of the
//     kind's write chains: write(view) == s.
func FuzzUndo(f *testing.F) {
	forged := []string{
		"",
		`[]`,
		`[{"path":"/metadata/name","hooked":"web","original":"vcluster-0"},{"path":"/metadata/namespace","hooked":"ns","original":"kube-system"}]`,
		`[{"path":"/metadata/ownerReferences","original":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"u"}]},{"path":"/metadata/deletionTimestamp","original":"2026-01-01T00:00:00Z"}]`,
		`[{"path":"/metadata/labels/app","hooked":"web","original":"evil"},{"path":"/spec/securityContext","original":{"runAsUser":0}}]`,
		`[{"path":"/metadata/labels/synchook.io~1tenant","hooked":"a"}]`,
		`[{"path":"","original":{}}]`,
		`not json`,
	}
	for i, s := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"web","host-only":"x"},"annotations":{"a":"b"}},"spec":{"nodeName":"n1","containers":[{"name":"c","env":[{"name":"A","value":"1"}],"resources":{"limits":{"cpu":"1"}}}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":null},"spec":{"tolerations":[{"key":"x"}],"nodeSelector":{"pool":"old"}}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"synchook.io/undo":"[]","synchook.io/mutated-by":"labels@v1#00000000"}}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ns","uid":"u1","labels":{"app":"web","synchook.io/tenant":"a"},"annotations":{"synchook.io/owner":"platform"}}}`,
	} {
		f.Add([]byte(s), forged[i%len(forged)])
		f.Add([]byte(s), forged[(i+3)%len(forged)])
	}
	for _, v := range forged {
		f.Add(fixtures.JSON(fixtures.Pod("ns", "web")), v)
	}
	// undoRegistry's chains take the general path; labelsOnly's take the label/annotation fast
	// path on both sides (undoMetadata).
	labels := builtin.Labels{Labels: map[string]string{"synchook.io/tenant": "a", "app": "overwritten"}, Annotations: map[string]string{"synchook.io/owner": "platform"}}
	// Sealed only: without a key there is no undo (a hooked write is refused).
	var registries []*engine.Registry
	for _, keys := range []*undo.Keeper{testKeeper(f)} {
		labelsOnly := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
		labelsOnly.MustRegister(hooks.NewMetadataFunc("labels", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical, hooks.CreateVirtual, hooks.UpdateVirtual}, builtin.LabelsFunc(labels), builtin.LabelsMetadataFunc(labels)))
		registries = append(registries, undoRegistry(f, keys), labelsOnly)
	}
	pairs := map[hooks.HookType]hooks.HookType{
		hooks.CreatePhysical: hooks.GetPhysical, hooks.UpdatePhysical: hooks.GetPhysical,
		hooks.CreateVirtual: hooks.GetVirtual, hooks.UpdateVirtual: hooks.GetVirtual,
	}
	f.Fuzz(func(t *testing.T, raw []byte, forgedUndo string) {
		for _, reg := range registries {
			checkUndo(t, reg, pairs, raw, forgedUndo)
		}
	})
}

// checkUndo is FuzzUndo's property for one registry.
func checkUndo(t *testing.T, reg *engine.Registry, pairs map[hooks.HookType]hooks.HookType, raw []byte, forgedUndo string) {
	var x corev1.Pod
	if err := json.Unmarshal(raw, &x); err != nil {
		return // not a Pod
	}
	x.APIVersion, x.Kind = "v1", "Pod"
	if forgedUndo != "" {
		if x.Annotations == nil {
			x.Annotations = map[string]string{}
		}
		x.Annotations[undo.Annotation] = forgedUndo
	}
	sent, err := json.Marshal(&x) // what a syncer sends: its typed object, encoded
	if err != nil {
		t.Fatal(err)
	}
	x = corev1.Pod{} // as sent: invalid UTF-8 in the tenant's value became U+FFFD
	if err := json.Unmarshal(sent, &x); err != nil {
		t.Fatal(err)
	}
	for write, read := range pairs {
		if engine.TakesAsOwnUndo(reg, corev1.SchemeGroupVersion.WithKind("Pod"), write, sent) {
			t.Fatalf("%s took a tenant's value as synchook's own undo: %q", write, forgedUndo)
		}
		hooked, err := mutated(t, reg, write, sent)
		if err != nil {
			continue // e.g. an undo too large: refused, nothing written
		}
		if forgedUndo != "" && annotation(t, hooked, undo.Annotation) == forgedUndo {
			t.Fatalf("%s stored the tenant's undo as written: %s", write, hooked)
		}
		want := &x
		if write == hooks.CreatePhysical || write == hooks.CreateVirtual {
			// the host stores a Create with its own creationTimestamp (a Create's seal opens
			// only on an object created within undo.NameBindWindow of it)
			now := time.Now()
			hooked = hoststore.Created(hooked, now)
			want = &corev1.Pod{}
			if err := json.Unmarshal(hoststore.Created(sent, now), want); err != nil {
				t.Fatal(err)
			}
		}
		final, err := mutated(t, reg, read, hooked)
		if err != nil {
			t.Fatalf("%s after %s: %v", read, write, err)
		}
		var got corev1.Pod
		if err := json.Unmarshal(final, &got); err != nil {
			t.Fatal(err)
		}
		if !sameObject(&got, want) {
			t.Fatalf("%s(%s(x)) != x\nx     %s\nhooked %s\nfinal %s", read, write, sent, hooked, final)
		}
	}
	// The tenant's value stored as it is: no seal of synchook's opens, so the view is the
	// stored object exactly.
	for _, read := range []hooks.HookType{hooks.GetPhysical, hooks.GetVirtual} {
		view, err := mutated(t, reg, read, sent)
		if err != nil {
			t.Fatalf("%s of a stored object with a forged undo: %v (a malformed undo must not fail the read)", read, err)
		}
		if !sameJSON(t, view, sent) {
			t.Fatalf("%s applied a tenant's undo:\nstored %s\nview   %s", read, sent, view)
		}
	}
}

// testKeeper returns a Keeper with a new one-key Ring.
func testKeeper(tb testing.TB) *undo.Keeper {
	ring, err := undo.GenerateRing()
	if err != nil {
		tb.Fatal(err)
	}
	return undo.NewKeeper(ring)
}

// mutated runs reg's chain of type t on the Pod doc and returns the object with the patch
// applied.
func mutated(t *testing.T, reg *engine.Registry, typ hooks.HookType, doc []byte) ([]byte, error) {
	t.Helper()
	res, err := reg.Mutate(context.Background(), corev1.SchemeGroupVersion.WithKind("Pod"), typ, doc)
	if err != nil {
		return nil, err
	}
	if res.Patch == nil {
		return doc, nil
	}
	out, err := patch.Apply(doc, res.Patch)
	if err != nil {
		t.Fatalf("%s patch %s: %v", typ, res.Patch, err)
	}
	return out, nil
}

func annotation(t *testing.T, doc []byte, key string) string {
	t.Helper()
	var o struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(doc, &o); err != nil {
		t.Fatal(err)
	}
	return o.Metadata.Annotations[key]
}

// sameJSON compares two objects by meaning, the entries of their undo annotations as a set
// (their order follows the member order of the document a write chain diffed).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	norm := func(doc []byte) any {
		var v map[string]any
		if err := json.Unmarshal(doc, &v); err != nil {
			t.Fatal(err)
		}
		if meta, ok := v["metadata"].(map[string]any); ok {
			if ann, ok := meta["annotations"].(map[string]any); ok {
				if u, ok := ann[undo.Annotation].(string); ok {
					var entries []any
					if json.Unmarshal([]byte(u), &entries) == nil {
						canon := make([]string, len(entries))
						for i, e := range entries {
							b, _ := json.Marshal(e)
							canon[i] = string(b)
						}
						slices.Sort(canon)
						ann[undo.Annotation] = canon
					}
				}
			}
		}
		return v
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
