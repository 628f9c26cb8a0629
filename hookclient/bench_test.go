package hookclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/hookclient"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
)

// BenchmarkClientRoundTrip is the client→sidecar round trip over real HTTPS on loopback
// (HTTP/1.1 keep-alive): one Mutate of the 5 KiB Pod with a label hook, patch applied in place.
func BenchmarkClientRoundTrip(b *testing.B) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("label", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, labelFn("synchook.io/bench", "true")))
	s := startSidecar(b, reg, "", nil)
	c := newClient(b, s, hookclient.Options{})
	b.ReportAllocs()
	for b.Loop() {
		pod := fixtures.Pod("ns", "web")
		if err := c.Mutate(b.Context(), hooks.CreatePhysical, pod); err != nil {
			b.Fatal(err)
		}
		if pod.Labels["synchook.io/bench"] != "true" {
			b.Fatal("label missing")
		}
	}
}

// BenchmarkList1000VsSingle measures, in the same run, one batched GetPhysical request for a
// List of 1,000 ~2 KiB Pods (1,000 of the 5 KiB Pod would pass the 3 MiB request limit and be
// split) and one single-pod GetPhysical of the same Pod, and reports list/single (the target
// is at most 25). It also measures the List's own floor: a typed JSON decode + encode of each
// of the 1,000 items on one goroutine, the least work that hands every item to a hook as a
// typed object, and reports list/floor and floor/single. The same List with the same label
// written by a MetadataHook (the config labels hook's fast path: items are never decoded into
// the typed object) is measured too: metalist/floor.
func BenchmarkList1000VsSingle(b *testing.B) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("label", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, labelFn("synchook.io/bench", "true")))
	s := startSidecar(b, reg, "", nil)
	c := newClient(b, s, hookclient.Options{})
	metaReg := engine.NewRegistry(nil)
	metaReg.MustRegister(hooks.NewMetadataFunc("label", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, labelFn("synchook.io/bench", "true"),
		func(_ context.Context, m *hooks.Metadata) error {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			delete(m.Labels, "drop")
			m.Labels["synchook.io/bench"] = "true"
			return nil
		}))
	metaClient := newClient(b, startSidecar(b, metaReg, "", nil), hookclient.Options{})
	list := &corev1.PodList{}
	for i := range 1000 {
		list.Items = append(list.Items, *smallPod(fmt.Sprintf("web-%d", i)))
	}
	var single, batch, metaBatch, floor time.Duration
	n := 0
	for b.Loop() {
		t2 := time.Now()
		for i := range list.Items {
			raw, err := json.Marshal(&list.Items[i])
			if err != nil {
				b.Fatal(err)
			}
			var pod corev1.Pod
			if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &pod); err != nil {
				b.Fatal(err)
			}
		}
		floor += time.Since(t2)
		t0 := time.Now()
		for range 10 {
			pod := smallPod("web")
			if err := c.Mutate(b.Context(), hooks.GetPhysical, pod); err != nil {
				b.Fatal(err)
			}
		}
		single += time.Since(t0) / 10
		l := list.DeepCopy()
		t1 := time.Now()
		if err := c.MutateList(b.Context(), hooks.GetPhysical, l); err != nil {
			b.Fatal(err)
		}
		batch += time.Since(t1)
		if l.Items[999].Labels["synchook.io/bench"] != "true" {
			b.Fatal("label missing on the last item")
		}
		l = list.DeepCopy()
		t3 := time.Now()
		if err := metaClient.MutateList(b.Context(), hooks.GetPhysical, l); err != nil {
			b.Fatal(err)
		}
		metaBatch += time.Since(t3)
		if l.Items[999].Labels["synchook.io/bench"] != "true" {
			b.Fatal("label missing on the last item (metadata hook)")
		}
		n++
	}
	b.ReportMetric(float64(single.Microseconds())/float64(n), "single-µs")
	b.ReportMetric(float64(batch.Microseconds())/float64(n), "list1000-µs")
	b.ReportMetric(float64(batch)/float64(single), "list/single")
	b.ReportMetric(float64(batch)/float64(floor), "list/floor")
	b.ReportMetric(float64(floor)/float64(single), "floor/single")
	b.ReportMetric(float64(metaBatch)/float64(floor), "metalist/floor")
}

// smallPod is a ~2 KiB Pod: labels, one container with env, resources and a probe.
func smallPod(name string) *corev1.Pod {
	p := fixtures.Pod("ns", name)
	p.Annotations = nil
	p.Spec.Containers = p.Spec.Containers[:1]
	p.Spec.Containers[0].Env = p.Spec.Containers[0].Env[:2]
	p.Spec.Containers[0].ReadinessProbe = nil
	p.Status.Conditions = p.Status.Conditions[:1]
	return p
}
