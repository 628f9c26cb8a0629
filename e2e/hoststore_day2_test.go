package e2e

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
)

// labelsAndNodeSelector is a config that labels a Pod (a change an update can take back) and
// strips its only nodeSelector key (one an update cannot: a Pod's spec is immutable).
const labelsAndNodeSelector = `hooks:
  - name: labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    labels: {labels: {team: a}}
  - name: strip
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    strip: {paths: [/spec/nodeSelector/disk]}
`

// testAfterAConfigChange is the storage oracle after the hooks that sealed an undo were removed
// or their chain changed (undo.Rule.Rewriters no longer the record's writers): on the object a
// real kube-apiserver stores, the read takes off what an update can change back (labels, a
// Secret's data), leaves what it cannot as stored, and the next write records that again
// (undo.Rule.Rewrite seals the carried entries alone) instead of losing it.
func testAfterAConfigChange(t *testing.T, c client.Client, ring *undo.Ring) {
	keys := undo.NewKeeper(ring)
	registry := func(cfg string) *engine.Registry {
		t.Helper()
		parsed, err := config.Parse([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
		if err := parsed.Build(reg); err != nil {
			t.Fatal(err)
		}
		reg.CoverUndoReads(keys.SealedKinds()) // as the binary does at start
		return reg
	}
	const removed = "hooks: []\n"
	setup := func(t *testing.T, name, cfg, object string) (o oracle, plain, stored []byte) {
		t.Helper()
		plainNS, hookedNS := "day2-plain-"+name, "day2-hooked-"+name
		for _, ns := range []string{plainNS, hookedNS} {
			if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
		}
		sent, err := yaml.YAMLToJSON([]byte(object))
		if err != nil {
			t.Fatal(err)
		}
		gvk, err := engine.ObjectGVK(sent)
		if err != nil {
			t.Fatal(err)
		}
		o = oracle{t: t, c: c, reg: registry(cfg), gvk: gvk}
		return o, o.write(plainNS, sent, false), o.write(hookedNS, o.mutate(hooks.CreatePhysical, inNamespace(t, sent, hookedNS)), false)
	}

	t.Run("Secret, its only key stripped, the hook removed", func(t *testing.T) {
		o, plain, stored := setup(t, "secret", strip("v1", "Secret", "/data/password"), `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {password: cHc=}}`)
		o.reg = registry(removed)
		view := o.read(stored)
		o.same("read with the hook removed", view, plain)
		const update = `{"metadata":{"labels":{"rev":"2"}}}`
		plain = o.write("day2-plain-secret", mergeJSON(t, plain, update), false)
		stored = o.write("day2-hooked-secret", o.mutate(hooks.UpdatePhysical, mergeJSON(t, view, update)), false)
		o.same("update with the hook removed", o.read(stored), plain)
	})

	t.Run("Pod, a label added and its only nodeSelector key stripped", func(t *testing.T) {
		o, _, stored := setup(t, "pod", labelsAndNodeSelector, pod("  nodeSelector: {disk: ssd}"))
		// check says what a read view of the Pod must be: the tenant's labels, no nodeSelector
		// (the host's Pod has none and an update cannot give it one), and the stripped key
		// still recorded, so that `synchook cleanup` lists it.
		check := func(step string, view []byte, labels map[string]string) {
			t.Helper()
			var p corev1.Pod
			if err := yaml.Unmarshal(view, &p); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(p.Labels, labels) || p.Spec.NodeSelector != nil {
				t.Errorf("%s: labels %v, nodeSelector %v; want labels %v and no nodeSelector (as stored)", step, p.Labels, p.Spec.NodeSelector, labels)
			}
			res, err := undo.Rule{Ring: ring, MaxBytes: undo.DefaultMaxBytes}.Cleanup(t.Context(), o.gvk, undo.Physical, view)
			if err != nil || len(res.Unrestored) != 1 || !strings.HasPrefix(res.Unrestored[0], "/spec/nodeSelector") {
				t.Errorf("%s: cleanup of the view gives %+v, %v; want the nodeSelector listed as not restorable", step, res, err)
			}
		}

		o.reg = registry(removed)
		check("read with both hooks removed", o.read(stored), map[string]string{"app": "web"})

		// The labels hook removed, the strip kept: the chain's writers changed, so only what
		// an update can change back is taken off, and the tenant's next update (the strip
		// changes nothing: there is no nodeSelector) records the rest again.
		o.reg = registry(strip("v1", "Pod", "/spec/nodeSelector/disk"))
		view := o.read(stored)
		check("read with the labels hook removed", view, map[string]string{"app": "web"})
		stored = o.write("day2-hooked-pod", o.mutate(hooks.UpdatePhysical, mergeJSON(t, view, `{"metadata":{"labels":{"rev":"1"}}}`)), false)
		check("read after the tenant's update", o.read(stored), map[string]string{"app": "web", "rev": "1"})
		check("the stored object after the tenant's update", stored, map[string]string{"app": "web", "rev": "1"})
	})
}
