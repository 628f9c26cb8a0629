package vcluster

// What the host stores, with vcluster's real syncer (issue 40): vcluster v0.36.1 reads the
// host object as the host kube-apiserver stored it and merges Secret data both ways
// (patcher.MergeBidirectional between the object it last wrote and what GetPhysical gives).
// A strip of a Secret's only key leaves `data: {}`, which the apiserver stores as no data at
// all; a read that cannot restore into that missing parent shows vcluster a Secret without the
// key, and vcluster copies the absence to the tenant.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// secretDataDiff says how data differs from want, by key and length only (never a value).
func secretDataDiff(want, data map[string][]byte) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := data[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("-data %s", k))
		case !bytes.Equal(got, want[k]):
			out = append(out, fmt.Sprintf("~data %s (%d bytes, want %d)", k, len(got), len(want[k])))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("+data %s (%d bytes)", k, len(data[k])))
		}
	}
	return out
}

// TestVClusterSyncerOneKeySecretKeepsItsValue: the tenant's Secret has exactly one key,
// password, which the strip hook keeps off the host (CreatePhysical and UpdatePhysical). A pod
// refers to it (vcluster syncs only Secrets a pod uses). The tenant creates it, then adds a
// label once. In every recorded version of the virtual Secret its data is exactly what the
// tenant wrote; no version of the host Secret holds any form of the value; after it settled,
// neither Secret changes in the no-loop window, and synchook detects no loop.
//
// Before 4cd8bd1 (undo.Apply could not restore into a parent the apiserver dropped) the
// virtual Secret lost its password: the host stores no data, the read view had none, and
// vcluster's two-way data merge removed the key from the tenant's Secret.
func TestVClusterSyncerOneKeySecretKeepsItsValue(t *testing.T) {
	began := time.Now()
	cl := startClusters(t)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	recorders := []*eventRecorder{hostEvents, virtualEvents}
	s := startSyncer(t, cl, day2Plugin(t, secretStripHook))

	const name = "onekey"
	written := map[string][]byte{"password": []byte(day2Password)}
	ctx := t.Context()
	v := cl.virtual.cs.CoreV1()
	if _, err := v.Secrets(tenantNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS},
		Type:       corev1.SecretTypeOpaque,
		Data:       written,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Pods(tenantNS).Create(ctx, tenantPod("web", name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hs := waitHost(t, cl, kindSecret, name, nil)
	checkSecretHidden(t, cl, hs.GetName(), "created")
	settleObjects(t, recorders, kindSecret, name)

	updated := time.Now()
	patchVirtual(t, cl, kindSecret, name, `{"metadata":{"labels":{"rev":"1"}}}`)
	hs = waitHost(t, cl, kindSecret, name, hasLabels(map[string]string{"rev": "1"}))
	checkSecretHidden(t, cl, hs.GetName(), "updated")
	settleObjects(t, recorders, kindSecret, name)
	t.Logf("created, updated once and settled in %s", time.Since(began).Round(time.Millisecond))

	t.Run("the virtual Secret holds exactly what the tenant wrote in every recorded version", func(t *testing.T) {
		evs, err := virtualEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindSecret && ev.obj.GetName() == name })
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) < 2 {
			t.Fatalf("%d events of the virtual Secret recorded, want at least its create and the tenant's update", len(evs))
		}
		for _, ev := range evs {
			sec := ev.obj.(*corev1.Secret)
			if d := secretDataDiff(written, sec.Data); len(d) > 0 {
				t.Errorf("virtual Secret %s rv %s (%s after the start): data %v, want exactly the tenant's password",
					ev.typ, sec.ResourceVersion, ev.at.Sub(began).Round(time.Millisecond), d)
			}
			if tr := day2Traces(sec); len(tr) > 0 {
				t.Errorf("virtual Secret %s rv %s shows %v", ev.typ, sec.ResourceVersion, tr)
			}
			if _, ok := sec.Labels["rev"]; ok && ev.at.Before(updated) {
				t.Errorf("virtual Secret %s rv %s has the label rev before the tenant set it", ev.typ, sec.ResourceVersion)
			}
		}
		now, err := v.Secrets(tenantNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := secretDataDiff(written, now.Data); len(d) > 0 {
			t.Errorf("the virtual Secret as stored now: data %v, want exactly the tenant's password", d)
		}
		if now.Labels["rev"] != "1" {
			t.Errorf("the virtual Secret lost the tenant's label rev=1: %v", now.Labels)
		}
		t.Logf("%d versions of the virtual Secret checked", len(evs))
	})

	t.Run("no version of the host Secret holds any form of the value", func(t *testing.T) {
		checkSecretHidden(t, cl, hs.GetName(), "at the end")
		evs, err := hostEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindSecret && ev.obj.GetName() == hs.GetName() })
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			raw, _ := json.Marshal(ev.obj)
			if forms := leakedForms(raw, day2Password); len(forms) > 0 {
				t.Errorf("host Secret %s rv %s holds the value (%s)", ev.typ, ev.obj.GetResourceVersion(), strings.Join(forms, ", "))
			}
		}
		final := hs.(*corev1.Secret)
		if _, ok := final.Data["password"]; ok {
			t.Errorf("the host Secret has a password key")
		}
		if id := undoKeyID(final.Annotations[undoAnnotation]); id == "" {
			t.Errorf("the host Secret's %s is not sealed (%d bytes)", undoAnnotation, len(final.Annotations[undoAnnotation]))
		}
		t.Logf("%d versions of the host Secret checked; it stores %d data keys", len(evs), len(final.Data))
	})

	t.Run("no loop: neither Secret changes in the window after they settled", func(t *testing.T) {
		window := noLoopWindow(t)
		start := time.Now()
		host := watchUnchanged(t, cl.host, kindSecret, hostNamespace, hs.GetName(), window)
		virtual := watchUnchanged(t, cl.virtual, kindSecret, tenantNS, name, window)
		if ch := host(); len(ch) > 0 {
			t.Errorf("the host Secret changed %d times within %s:\n  %s", len(ch), window, strings.Join(ch, "\n  "))
		}
		if ch := virtual(); len(ch) > 0 {
			t.Errorf("the virtual Secret changed %d times within %s:\n  %s", len(ch), window, strings.Join(ch, "\n  "))
		}
		t.Logf("watched both Secrets for %s", time.Since(start).Round(time.Millisecond))
		writes, err := hostEvents.since(updated, func(ev recordedEvent) bool { return ev.kind == kindSecret && ev.obj.GetName() == hs.GetName() })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("host Secret writes since the tenant's update: %d", len(writes))
		if len(writes) > 1 {
			all, _ := hostEvents.since(time.Time{}, nil)
			t.Errorf("the tenant's one update made %d writes of the host Secret, want 1:%s", len(writes), describeUpdates(writes, all))
		}
		if lines := s.log.lines("loop detected"); len(lines) > 0 {
			t.Errorf("synchook logged loops:\n%s", strings.Join(lines, "\n"))
		}
		loops, err := s.metricSum(ctx, "synchook_loops_detected_total")
		if err != nil {
			t.Fatalf("synchook's metrics: %v", err)
		}
		if loops != 0 {
			t.Errorf("synchook_loops_detected_total = %v, want 0", loops)
		}
		skipped, _ := s.metricSamples(ctx, "synchook_undo_entries_skipped_total")
		requests, _ := s.metricSamples(ctx, "synchook_requests_total")
		secretRequests := map[string]float64{}
		for labels, n := range requests {
			if metricLabel(labels, "gvk") == "v1/Secret" {
				secretRequests[metricLabel(labels, "hook_type")] += n
			}
		}
		t.Logf("synchook: Secret requests %v; synchook_undo_entries_skipped_total %v", secretRequests, skipped)
	})
	t.Logf("whole test: %s", time.Since(began).Round(time.Millisecond))
}

// heldTolerationHook strips every toleration of a pod, alone in the Pod chain: with no other
// hook on pods the engine edits the JSON and keeps `tolerations: []`, so the undo records one
// insert per toleration (with the length the hooks wrote, 0) and the read meets the tolerations
// the host apiserver's DefaultTolerationSeconds added back: undo.Apply's no-duplicate rule
// (SkipHeld). Any typed hook in the chain (labels, image, policy) makes the engine encode the
// typed pod, which drops the empty list: the undo then records the whole field, and the rule is
// never reached (TestVClusterSyncerMutatingHost).
const heldTolerationHook = `
- name: strip-tolerations
  resources: [{apiVersion: v1, kind: Pod}]
  types: [CreatePhysical, UpdatePhysical]
  strip: {paths: ["/spec/tolerations/*"]}
`

// heldRun is what one run of TestVClusterSyncerStrippedTolerationsNotDoubled saw.
type heldRun struct {
	writes       map[string]int // the syncer's writes of the pod (host and virtual), by auditWrite.key
	hostVersions int
	held         float64 // synchook_undo_entries_skipped_total{reason="held"}
}

// runHeldTolerations: the tenant creates a pod with a toleration of its own (its apiserver adds
// the two DefaultTolerationSeconds tolerations), waits for the host twin, settles, adds a label,
// waits and settles again; with synchook the host twin never holds the tenant's toleration nor
// any toleration twice.
func runHeldTolerations(t *testing.T, withSynchook bool) heldRun {
	cl, audit := startAuditedClusters(t)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	recorders := []*eventRecorder{hostEvents, virtualEvents}
	spec := syncerSpec{}
	if withSynchook {
		spec = day2Plugin(t, heldTolerationHook)
	}
	s := startSyncer(t, cl, spec)
	ctx := t.Context()
	p := tenantPod(mhPod, "")
	p.Spec.Tolerations = []corev1.Toleration{{Key: tenantTolerationKey, Operator: corev1.TolerationOpEqual, Value: tenantNS, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := cl.virtual.cs.CoreV1().Pods(tenantNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHost(t, cl, kindPod, mhPod, nil)
	settleObjects(t, recorders, kindPod, mhPod)
	patchVirtual(t, cl, kindPod, mhPod, mhLabelPatch)
	hp := waitHost(t, cl, kindPod, mhPod, hasLabels(map[string]string{mhRevLabel: "1"}))
	settleObjects(t, recorders, kindPod, mhPod)

	run := heldRun{writes: map[string]int{}}
	for _, w := range audit.writes(t, func(w auditWrite) bool {
		return strings.HasPrefix(w.user, "vcluster-") && w.resource == "pods" &&
			(w.cluster == "host" && w.namespace == hostNamespace && w.name == hp.GetName() || w.cluster == "virtual" && w.namespace == tenantNS && w.name == mhPod)
	}) {
		run.writes[w.key()]++
	}
	evs, err := hostEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindPod && ev.obj.GetName() == hp.GetName() })
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		run.hostVersions++
		h := ev.obj.(*corev1.Pod)
		if d := duplicateTolerations(h); len(d) > 0 {
			t.Errorf("host pod %s rv %s holds tolerations twice: %v", ev.typ, h.ResourceVersion, d)
		}
		if withSynchook && slices.ContainsFunc(h.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == tenantTolerationKey }) {
			t.Errorf("host pod %s rv %s has the tenant's toleration %s that synchook strips", ev.typ, h.ResourceVersion, tenantTolerationKey)
		}
	}
	if withSynchook {
		skipped, err := s.metricSamples(ctx, "synchook_undo_entries_skipped_total")
		if err != nil {
			t.Fatalf("synchook's metrics: %v", err)
		}
		for labels, n := range skipped {
			if metricLabel(labels, "reason") == "held" {
				run.held += n
			}
		}
		t.Logf("synchook_undo_entries_skipped_total %v", skipped)
	}
	t.Logf("host pod at the end: %s; %d host versions; the syncer's writes of the pod: %v", brief(hp), run.hostVersions, run.writes)
	return run
}

// TestVClusterSyncerStrippedTolerationsNotDoubled: a strip of every toleration, alone in the Pod
// chain, on a host apiserver whose DefaultTolerationSeconds adds two of them back. The read
// restores the tenant's own toleration and leaves out the two the host holds already
// (synchook_undo_entries_skipped_total{reason="held"} counts them), so vcluster, which keeps
// the tenant's tolerations plus the host's others, finds nothing to change: with synchook the
// syncer writes the pod no more often than without (audit logs, no-op writes included), and no
// host version holds a toleration twice.
func TestVClusterSyncerStrippedTolerationsNotDoubled(t *testing.T) {
	requireEnvtest(t)
	began := time.Now()
	var baseline, with heldRun
	t.Run("baseline: vcluster without synchook", func(t *testing.T) { baseline = runHeldTolerations(t, false) })
	t.Run("with synchook", func(t *testing.T) { with = runHeldTolerations(t, true) })
	if baseline.writes == nil || with.writes == nil {
		t.Fatal("a run did not finish")
	}
	if with.held == 0 {
		t.Errorf("no undo entry was skipped as held: the read never met the tolerations the host added back (the no-duplicate rule is not exercised)")
	}
	for _, k := range slices.Sorted(maps.Keys(with.writes)) {
		if with.writes[k] > baseline.writes[k] {
			t.Errorf("%s: %d writes of the pod with synchook, %d without", k, with.writes[k], baseline.writes[k])
		}
	}
	t.Logf("whole test: %s; %d + %d host versions checked", time.Since(began).Round(time.Millisecond), baseline.hostVersions, with.hostVersions)
}
