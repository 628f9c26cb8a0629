package hooks_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/patch"
)

// undoRegistry has, with automatic undo on, one write chain per shape of hook — labels (the
// fast path), strip (typed), a Go hook that edits the spec (JSON-patch-like: adds a toleration,
// sets a node selector, drops the first container's env) and all three in one chain — and no
// Get hooks at all.
func undoRegistry(f *testing.F) *hooks.Registry {
	reg := hooks.NewRegistryWithOptions(hooks.RegistryOptions{Undo: true})
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

// FuzzUndo proves automatic undo: for any Pod and every write chain, the paired Get (with no
// Get hook registered) gives back exactly the object the syncer sent — GetPhysical(
// CreatePhysical(x)) == x — and the undo annotation is gone.
func FuzzUndo(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"web","host-only":"x"},"annotations":{"a":"b"}},"spec":{"nodeName":"n1","containers":[{"name":"c","env":[{"name":"A","value":"1"}],"resources":{"limits":{"cpu":"1"}}}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":null},"spec":{"tolerations":[{"key":"x"}],"nodeSelector":{"pool":"old"}}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"synchook.io/undo":"[]"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Add(fixtures.JSON(fixtures.Pod("ns", "web")))
	reg := undoRegistry(f)
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	pairs := map[hooks.HookType]hooks.HookType{
		hooks.CreatePhysical: hooks.GetPhysical, hooks.UpdatePhysical: hooks.GetPhysical,
		hooks.CreateVirtual: hooks.GetVirtual, hooks.UpdateVirtual: hooks.GetVirtual,
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var x corev1.Pod
		if err := json.Unmarshal(raw, &x); err != nil {
			return // not a Pod
		}
		if _, carries := x.Annotations[hooks.UndoAnnotation]; carries {
			return // not a Pod, or one that carries an undo of its own
		}
		x.APIVersion, x.Kind = "v1", "Pod"
		sent, err := json.Marshal(&x) // what a syncer sends: its typed object, encoded
		if err != nil {
			t.Fatal(err)
		}
		for write, read := range pairs {
			res, err := reg.Mutate(context.Background(), gvk, write, sent)
			if err != nil {
				continue // e.g. an undo too large: refused, nothing written
			}
			hooked := sent
			if res.Patch != nil {
				if hooked, err = patch.Apply(sent, res.Patch); err != nil {
					t.Fatalf("%s patch %s: %v", write, res.Patch, err)
				}
			}
			back, err := reg.Mutate(context.Background(), gvk, read, hooked)
			if err != nil {
				t.Fatalf("%s after %s: %v", read, write, err)
			}
			final := hooked
			if back.Patch != nil {
				if final, err = patch.Apply(hooked, back.Patch); err != nil {
					t.Fatalf("%s patch %s: %v", read, back.Patch, err)
				}
			}
			var got corev1.Pod
			if err := json.Unmarshal(final, &got); err != nil {
				t.Fatal(err)
			}
			if !sameObject(&got, &x) {
				t.Fatalf("%s(%s(x)) != x\nx     %s\nhooked %s\nfinal %s", read, write, sent, hooked, final)
			}
		}
	})
}
