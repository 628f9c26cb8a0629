package vcluster

// Tests with vcluster's real syncer (v0.36.1) between two real kube-apiservers and synchook
// loaded into it as a plugin v2.
//
// Route: vcluster's own start sequence (cmd/vcluster/cmd/start.go, StartInCluster) driven step
// by step in a process of its own (runSyncerProcess, in syncer_helpers_test.go), with
// setup.Initialize (certificates, kine, the virtual kube-apiserver) and setup.StartProxy left
// out: the virtual cluster is an envtest kube-apiserver. So the syncers, their managers and
// pluginhookclient's wrapped clients, the mapping store, the plugin manager that starts
// synchook from $PLUGIN_FOLDER/synchook/plugin with PLUGIN_CONFIG, SetLeader, and every
// controller the chart's default values enable are vcluster's, unchanged. The config is the
// chart's default values plus plugins: from the repository's plugin.yaml (its image, command,
// args, and its hooks, to which the tests add theirs). A process per syncer because vcluster
// keeps its plugin manager, translators and owner in package variables; it also lets the
// tests restart the syncer (a new config means a new vcluster pod) and measure the CPU of the
// syncer and its plugins (its process group).
//
// What the chart and the control plane would have made is created by hand
// (clusters.bootstrap): the host namespace, the vc-config-<name> Secret, the vcluster Service,
// and in the virtual cluster the default ServiceAccounts. There is no scheduler and no kubelet:
// host pods stay Pending.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"
)

// What the hooks of the syncer tests add.
const (
	hookedLabel          = "synchook.io/hooked" // plugin.yaml's pod-labels hook, pods and services
	ownerAnnotation      = "synchook.io/owner"  // pod-owner
	provenanceAnnotation = "synchook.io/mutated-by"
	// The policy hook pool-scheduling adds a toleration and a nodeSelector entry with this key.
	policyTolerationKey   = "synchook.io/pool"
	policyNodeSelectorKey = "synchook.io/pool"
	// The host pod's address that plugin.yaml's strip-host-ip (GetPhysical) hides.
	hostIP = "192.0.2.17"
)

// syncerHooks are the hooks the tests add after plugin.yaml's own (pod-labels: synchook.io/hooked
// on pods and services; strip-host-ip: /status/hostIP and hostIPs on GetPhysical of pods).
const syncerHooks = `
- name: pod-owner
  resources: [{apiVersion: v1, kind: Pod}]
  types: [CreatePhysical, UpdatePhysical]
  labels: {annotations: {synchook.io/owner: platform}}
- name: secret-labels
  resources: [{apiVersion: v1, kind: Secret}]
  types: [CreatePhysical, UpdatePhysical]
  labels: {labels: {synchook.io/hooked: "true"}}
- name: pool-scheduling
  types: [CreatePhysical, UpdatePhysical]
  policy:
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingAdmissionPolicy
    metadata: {name: pool-scheduling}
    spec:
      reinvocationPolicy: Never
      failurePolicy: Fail
      matchConstraints:
        resourceRules:
          - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
      variables:
        - name: toleration
          expression: '{"key": "synchook.io/pool", "operator": "Equal", "value": "tenants", "effect": "NoSchedule"}'
      mutations:
        - patchType: JSONPatch
          jsonPatch:
            expression: >-
              has(object.spec.tolerations) && object.spec.tolerations.exists(t, has(t.key) && t.key == "synchook.io/pool")
                ? []
                : has(object.spec.tolerations)
                  ? [JSONPatch{op: "add", path: "/spec/tolerations/-", value: variables.toleration}]
                  : [JSONPatch{op: "add", path: "/spec/tolerations", value: [variables.toleration]}]
        - patchType: JSONPatch
          jsonPatch:
            expression: >-
              has(object.spec.nodeSelector)
                ? [JSONPatch{op: "add", path: "/spec/nodeSelector/synchook.io~1pool", value: "tenants"}]
                : [JSONPatch{op: "add", path: "/spec/nodeSelector", value: {"synchook.io/pool": "tenants"}}]
`

// synchookSyncerConfig is synchook's config in TestVClusterSyncer: provenance on, plugin.yaml's hooks,
// then syncerHooks.
func synchookSyncerConfig(tb testing.TB) map[string]any {
	tb.Helper()
	return map[string]any{"provenance": true, "hooks": append(pluginYAMLHooks(tb), yamlList(tb, syncerHooks)...)}
}

func yamlList(tb testing.TB, y string) []any {
	tb.Helper()
	var l []any
	if err := yaml.Unmarshal([]byte(y), &l); err != nil {
		tb.Fatalf("hooks: %v", err)
	}
	return l
}

func hasPolicyToleration(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == policyTolerationKey })
}

// requireNoLoop waits until the objects hooked selects settled, then fails tb with every
// update of them in the no-loop window (noLoopWindow) that follows, on each recorder, and with
// every "loop detected" line of synchook's log.
func requireNoLoop(tb testing.TB, s *syncer, recorders []*eventRecorder, hooked func(recordedEvent) bool) {
	tb.Helper()
	settle(tb, recorders, hooked)
	window := noLoopWindow(tb)
	start := time.Now()
	select {
	case <-tb.Context().Done():
		tb.Fatal(tb.Context().Err())
	case <-time.After(window): // the measurement window, not a synchronisation
	}
	for _, r := range recorders {
		evs, err := r.since(start, hooked)
		if err != nil {
			tb.Fatal(err)
		}
		all, _ := r.since(time.Time{}, nil)
		if len(evs) > 0 {
			tb.Errorf("%d updates of hooked objects in the %s cluster within %s after they settled:%s", len(evs), r.cluster, window, describeUpdates(evs, all))
		}
	}
	if lines := s.log.lines("loop detected"); len(lines) > 0 {
		tb.Errorf("synchook logged loops:\n%s", strings.Join(lines, "\n"))
	}
}

// noLoopWindow is the measurement window of the no-loop cases (envNoLoopWindow).
func noLoopWindow(tb testing.TB) time.Duration {
	tb.Helper()
	if v := os.Getenv(envNoLoopWindow); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			tb.Fatalf("%s: %v", envNoLoopWindow, err)
		}
		return d
	}
	return defaultNoLoopWindow
}

// TestVClusterSyncer runs vcluster's syncer with synchook (plugin.yaml's hooks plus
// syncerHooks, provenance on) and checks both apiservers.
func TestVClusterSyncer(t *testing.T) {
	cl := startClusters(t)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	recorders := []*eventRecorder{hostEvents, virtualEvents}
	s := startSyncer(t, cl, syncerSpec{Plugins: []syncerPlugin{synchookFromPluginYAML(t, synchookSyncerConfig(t))}})

	ctx := t.Context()
	v := cl.virtual.cs.CoreV1()
	if _, err := v.Secrets(tenantNS).Create(ctx, tenantSecret("creds"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Pods(tenantNS).Create(ctx, tenantPod("web", "creds"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Services(tenantNS).Create(ctx, tenantService("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// what the hooks add, which the virtual objects must never show
	traceLabels := []string{hookedLabel}
	traceAnnotations := []string{ownerAnnotation, undoAnnotation, provenanceAnnotation}

	t.Run("pod, service and the secret the pod references appear on the host translated, with the hooks' labels, annotations and the policy's scheduling", func(t *testing.T) {
		pod := waitHost(t, cl, kindPod, "web", func(o object) string {
			p := o.(*corev1.Pod)
			switch {
			case p.Labels[hookedLabel] != "true":
				return "no label " + hookedLabel
			case p.Annotations[ownerAnnotation] != "platform":
				return "no annotation " + ownerAnnotation
			case !hasPolicyToleration(p):
				return "no toleration " + policyTolerationKey
			case p.Spec.NodeSelector[policyNodeSelectorKey] != "tenants":
				return "no nodeSelector " + policyNodeSelectorKey
			}
			return ""
		}).(*corev1.Pod)
		t.Logf("host pod %s: %s", pod.Name, brief(pod))
		if pod.Name == "web" || pod.Namespace != hostNamespace {
			t.Errorf("host pod %s/%s: want vcluster's translated name in %s", pod.Namespace, pod.Name, hostNamespace)
		}
		if pod.Labels["app"] != "web" {
			t.Errorf("host pod labels %v: want the tenant's app=web", pod.Labels)
		}
		if got := pod.Annotations[provenanceAnnotation]; !strings.Contains(got, "pod-labels") || !strings.Contains(got, "pool-scheduling") {
			t.Errorf("host pod %s = %q, want the hooks that changed it (provenance on)", provenanceAnnotation, got)
		}
		// vcluster adds KUBERNETES_* variables; the tenant's PASSWORD must name the host secret
		var secretRef *corev1.SecretKeySelector
		for _, e := range pod.Spec.Containers[0].Env {
			if e.Name == "PASSWORD" && e.ValueFrom != nil {
				secretRef = e.ValueFrom.SecretKeyRef
			}
		}
		if secretRef == nil || secretRef.Name == "creds" {
			t.Fatalf("host pod env %+v: want PASSWORD from the translated host secret", pod.Spec.Containers[0].Env)
		}

		svc := waitHost(t, cl, kindService, "web", func(o object) string {
			if o.GetLabels()[hookedLabel] != "true" {
				return "no label " + hookedLabel
			}
			return ""
		})
		t.Logf("host service %s: %s", svc.GetName(), brief(svc))

		secret := waitHost(t, cl, kindSecret, "creds", func(o object) string {
			if o.GetLabels()[hookedLabel] != "true" {
				return "no label " + hookedLabel
			}
			return ""
		}).(*corev1.Secret)
		if string(secret.Data["password"]) != string(tenantSecret("creds").Data["password"]) {
			t.Errorf("host secret data changed")
		}
		if secretRef.Name != secret.Name {
			t.Errorf("host pod refers to secret %q, the synced secret is %q", secretRef.Name, secret.Name)
		}

		for _, kind := range []string{kindPod, kindService, kindSecret} {
			name := map[string]string{kindPod: "web", kindService: "web", kindSecret: "creds"}[kind]
			requireCleanVirtual(t, recorders, virtualEvents, kind, name, traceLabels, traceAnnotations)
		}
	})

	t.Run("synchook's request counts show each hook type ran on pods, services and secrets", func(t *testing.T) {
		// every kind has a write chain (CreatePhysical) and, for its undo, a read chain
		// (GetPhysical); vcluster reads each host object back after creating it
		requireRequests(t, s, map[string][]string{
			"v1/Pod":     {"CreatePhysical", "GetPhysical"},
			"v1/Service": {"CreatePhysical", "GetPhysical"},
			"v1/Secret":  {"CreatePhysical", "GetPhysical"},
		})
	})

	t.Run("a label the tenant changes on the virtual pod reaches the host and the hook's label stays", func(t *testing.T) {
		patch := `{"metadata":{"labels":{"app":"web-v2","tier":"frontend"}}}`
		if _, err := v.Pods(tenantNS).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitHost(t, cl, kindPod, "web", func(o object) string {
			l := o.GetLabels()
			if l["app"] != "web-v2" || l["tier"] != "frontend" {
				return "tenant labels not synced"
			}
			if l[hookedLabel] != "true" {
				return "hook label " + hookedLabel + " gone"
			}
			return ""
		})
		requireCleanVirtual(t, recorders, virtualEvents, kindPod, "web", traceLabels, traceAnnotations)
		// the tenant's change went through UpdatePhysical
		requireRequests(t, s, map[string][]string{"v1/Pod": {"UpdatePhysical"}})
	})

	t.Run("a strip hook on GetPhysical hides the host pod's address from the virtual pod's status, and the host keeps it", func(t *testing.T) {
		// No kubelet here: the test sets the host pod's status as one would.
		hp, err := cl.host.cs.CoreV1().Pods(hostNamespace).Get(ctx, waitHost(t, cl, kindPod, "web", nil).GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hp.Status.Phase = corev1.PodRunning
		hp.Status.PodIP, hp.Status.PodIPs = "10.244.0.9", []corev1.PodIP{{IP: "10.244.0.9"}}
		hp.Status.HostIP, hp.Status.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
		if _, err := cl.host.cs.CoreV1().Pods(hostNamespace).UpdateStatus(ctx, hp, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// vcluster copies the host pod's status up: the podIP arriving proves it read it.
		statusSet := time.Now()
		waitVirtual(t, cl, kindPod, "web", func(o object) string {
			if o.(*corev1.Pod).Status.PodIP != "10.244.0.9" {
				return "the host pod's status did not reach the virtual pod"
			}
			return ""
		})
		// and no version of the virtual pod ever showed the address, until it settled
		settleObjects(t, recorders, kindPod, "web")
		evs, err := virtualEvents.since(statusSet, func(ev recordedEvent) bool { return ev.kind == kindPod && ev.obj.GetName() == "web" })
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if vp := ev.obj.(*corev1.Pod); vp.Status.HostIP != "" || len(vp.Status.HostIPs) > 0 {
				t.Errorf("the virtual pod showed the host's address at rv %s: hostIP %q, hostIPs %v", vp.ResourceVersion, vp.Status.HostIP, vp.Status.HostIPs)
			}
		}
		// Regression: a strip on GetPhysical of a field an Update keeps would be deleted from the
		// host at vcluster's next write (it writes back the whole object it read); status is not.
		got, err := cl.host.cs.CoreV1().Pods(hostNamespace).Get(ctx, hp.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.HostIP != hostIP {
			t.Errorf("the host pod lost its hostIP: %q", got.Status.HostIP)
		}
	})

	t.Run("a tenant's forged synchook.io/undo and synchook.io/mutated-by neither reach the host as written nor change what the syncer reads", func(t *testing.T) {
		// The tenant's pod already carries everything the hooks add, so the write chain changes
		// nothing of its own (issue 19's no-op chain), plus a forged undo that would show the
		// syncer a label the host pod does not have, and forged provenance.
		const forgedUndo = `[{"path":"/metadata/labels/forged.example.com~1by","original":"tenant"}]`
		p := tenantPod("forged", "")
		p.Labels[hookedLabel] = "true"
		p.Annotations = map[string]string{ownerAnnotation: "platform", undoAnnotation: forgedUndo, provenanceAnnotation: "tenant-hook"}
		p.Spec.Tolerations = []corev1.Toleration{{Key: policyTolerationKey, Operator: corev1.TolerationOpEqual, Value: "tenants", Effect: corev1.TaintEffectNoSchedule}}
		p.Spec.NodeSelector = map[string]string{policyNodeSelectorKey: "tenants"}
		if _, err := v.Pods(tenantNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitHost(t, cl, kindPod, "forged", nil)
		// a later tenant change that must reach the host: the syncer has read the host pod
		// (through GetPhysical) since it was created
		if _, err := v.Pods(tenantNS).Patch(ctx, "forged", types.MergePatchType, []byte(`{"metadata":{"labels":{"step":"2"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		hp := waitHost(t, cl, kindPod, "forged", func(o object) string {
			if o.GetLabels()["step"] != "2" {
				return "label step=2 not synced"
			}
			return ""
		})
		var broken []string
		if got, ok := hp.GetAnnotations()[undoAnnotation]; ok && got == forgedUndo {
			broken = append(broken, fmt.Sprintf("host pod carries the tenant's %s as written: %s", undoAnnotation, got))
		}
		if got, ok := hp.GetAnnotations()[provenanceAnnotation]; ok && got == "tenant-hook" {
			broken = append(broken, fmt.Sprintf("host pod carries the tenant's %s as written: %q", provenanceAnnotation, got))
		}
		if v, ok := hp.GetLabels()["forged.example.com/by"]; ok {
			broken = append(broken, fmt.Sprintf("host pod has the label forged.example.com/by=%s that only the forged undo names: the syncer read it and wrote it back", v))
		}
		settleObjects(t, recorders, kindPod, "forged")
		evs, err := virtualEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindPod && ev.obj.GetName() == "forged" })
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if v, ok := ev.obj.GetLabels()["forged.example.com/by"]; ok {
				broken = append(broken, fmt.Sprintf("the virtual pod at rv %s has the label forged.example.com/by=%s that only the forged undo names: the syncer read it and wrote it back", ev.obj.GetResourceVersion(), v))
			}
		}
		if len(broken) > 0 {
			t.Errorf("regression (issue 19: a tenant's forged synchook.io/undo / synchook.io/mutated-by shaped what vcluster read and wrote back): %s", strings.Join(broken, "; "))
		}
	})

	t.Run("no loop: after the objects settle, no update of the hooked objects on either side", func(t *testing.T) {
		hooked := func(ev recordedEvent) bool {
			if ev.typ != watch.Modified {
				return false
			}
			a := ev.obj.GetAnnotations()
			switch {
			case a[objectNamespaceAnnotation] == tenantNS: // a host twin
				return true
			case ev.obj.GetNamespace() == tenantNS: // a virtual object
				return true
			}
			return false
		}
		requireNoLoop(t, s, recorders, hooked)
	})

	t.Run("synchook_loops_detected_total stays 0", func(t *testing.T) {
		loops, err := s.metricSum(ctx, "synchook_loops_detected_total")
		if err != nil {
			// a synchook that serves no metrics (SYNCHOOK_METRICS_BIND_ADDRESS) cannot show that it detected no loop
			t.Fatalf("synchook's metrics at %s: %v", s.metricsAddr, err)
		}
		if loops != 0 {
			t.Errorf("synchook_loops_detected_total = %v, want 0", loops)
		}
		requests, _ := s.metricSum(ctx, "synchook_requests_total")
		rejected, _ := s.metricSum(ctx, "synchook_undo_rejected_total")
		t.Logf("synchook served %v requests; synchook_undo_rejected_total %v", requests, rejected)
	})

	t.Run("the virtual objects never showed what the hooks added, in any event since the start", func(t *testing.T) {
		evs, err := virtualEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.obj.GetName() != "forged" })
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			t.Fatal("no events recorded in the virtual cluster")
		}
		var readProvenance []string
		for _, ev := range evs {
			tr := hookTraces(ev.obj, traceLabels, traceAnnotations)
			if len(tr) == 1 && readHooksOnly(ev.obj.GetAnnotations()[provenanceAnnotation]) {
				// provenance added by a read chain (GetPhysical strip hooks) to the view
				readProvenance = append(readProvenance, fmt.Sprintf("%s %s %s rv %s: %v", ev.typ, ev.kind, ev.obj.GetName(), ev.obj.GetResourceVersion(), tr))
				continue
			}
			if len(tr) > 0 {
				t.Errorf("%s %s %s rv %s shows %v", ev.typ, ev.kind, ev.obj.GetName(), ev.obj.GetResourceVersion(), tr)
			}
		}
		if len(readProvenance) > 0 && !t.Failed() {
			t.Errorf("regression (read chains marked their views with synchook.io/mutated-by and vcluster copied it into the virtual object): %s", strings.Join(readProvenance, "; "))
		}
	})
}

// requireCleanVirtual waits until the virtual object kind tenantNS/name and its host twin
// settled (settleObjects: nothing written for 2 s) and fails tb with every recorded event of
// the virtual object, since the recorder started, that showed what the hooks add (hookTraces
// with labels and annotations): a watch over the object's whole life so far, not one read.
func requireCleanVirtual(tb testing.TB, recorders []*eventRecorder, virtual *eventRecorder, kind, name string, labels, annotations []string) {
	tb.Helper()
	settleObjects(tb, recorders, kind, name)
	evs, err := virtual.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kind && ev.obj.GetName() == name })
	if err != nil {
		tb.Fatal(err)
	}
	if len(evs) == 0 {
		tb.Fatalf("no event of the virtual %s %s recorded", kind, name)
	}
	for _, ev := range evs {
		if tr := hookTraces(ev.obj, labels, annotations); len(tr) > 0 {
			tb.Errorf("%s virtual %s %s rv %s shows what the hooks added: %v", ev.typ, kind, name, ev.obj.GetResourceVersion(), tr)
		}
	}
}

// requireRequests fails tb unless synchook's synchook_requests_total counts at least one
// request of each hook type in want[gvk] for that gvk ("v1/Pod"), whatever the result; it also
// fails when synchook's metrics cannot be read.
func requireRequests(tb testing.TB, s *syncer, want map[string][]string) {
	tb.Helper()
	samples, err := s.metricSamples(tb.Context(), "synchook_requests_total")
	if err != nil {
		tb.Fatalf("synchook's metrics at %s: %v", s.metricsAddr, err)
	}
	got := map[string]float64{} // gvk + " " + hook type
	for labels, v := range samples {
		got[metricLabel(labels, "gvk")+" "+metricLabel(labels, "hook_type")] += v
	}
	for _, gvk := range slices.Sorted(maps.Keys(want)) {
		for _, typ := range want[gvk] {
			if got[gvk+" "+typ] == 0 {
				tb.Errorf("synchook counted no %s request for %s; counted: %v", typ, gvk, got)
			}
		}
	}
}

// readHooksOnly reports whether a provenance value names only this test's GetPhysical hooks.
func readHooksOnly(provenance string) bool {
	if provenance == "" {
		return false
	}
	for _, h := range strings.Split(provenance, ",") {
		if !strings.HasPrefix(h, "strip-host-") {
			return false
		}
	}
	return true
}

// settle waits until the recorders saw no event that counts for 2 s in a row (at most 1 min).
func settle(tb testing.TB, rs []*eventRecorder, counts func(recordedEvent) bool) {
	tb.Helper()
	const quiet = 2 * time.Second
	waitFor(tb, time.Minute, "the hooked objects to settle", func(context.Context) (bool, string, error) {
		var last time.Time
		for _, r := range rs {
			evs, err := r.since(time.Time{}, counts)
			if err != nil {
				return false, "", err
			}
			if n := len(evs); n > 0 && evs[n-1].at.After(last) {
				last = evs[n-1].at
			}
		}
		if since := time.Since(last); since < quiet {
			return false, fmt.Sprintf("last update %s ago", since.Round(time.Millisecond)), nil
		}
		return true, "", nil
	})
}

// TestVClusterSyncerWithoutUndo is the contrast of TestVClusterSyncer's "virtual objects never
// show" cases: a labels hook with undo: false, so the syncer reads back what the hook added.
// What vcluster v0.36.1 does, and this test asserts: its three-way metadata merge sees host
// labels the tenant did not set and copies them into the virtual pod, overwriting the tenant's
// own value of a label the hook also sets (app) — the copy-up must show in the virtual pod's
// events within a minute, or this contrast could not tell undo from no undo (and vcluster's
// behaviour changed). And no loop: vcluster's write path runs the hook before every write, so
// the written object already has the labels and both sides settle (nothing written for 2 s,
// within a minute). With undo the GetPhysical view never shows the labels and nothing is copied.
func TestVClusterSyncerWithoutUndo(t *testing.T) {
	cl := startClusters(t)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	cfg := map[string]any{"hooks": yamlList(t, `
- name: pod-labels-no-undo
  resources: [{apiVersion: v1, kind: Pod}]
  types: [CreatePhysical, UpdatePhysical]
  undo: false
  labels: {labels: {synchook.io/hooked: "true", app: platform}}
`)}
	s := startSyncer(t, cl, syncerSpec{Plugins: []syncerPlugin{synchookFromPluginYAML(t, cfg)}})
	ctx := t.Context()
	start := time.Now()
	if _, err := cl.virtual.cs.CoreV1().Pods(tenantNS).Create(ctx, tenantPod("web", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHost(t, cl, kindPod, "web", func(o object) string {
		if o.GetLabels()[hookedLabel] != "true" {
			return "no label " + hookedLabel
		}
		return ""
	})
	copiedUp := func(o object) bool {
		return o.GetLabels()[hookedLabel] == "true" && o.GetLabels()["app"] == "platform"
	}
	waitFor(t, time.Minute, "vcluster to copy the hook's labels into the virtual pod (undo off)", func(context.Context) (bool, string, error) {
		evs, err := virtualEvents.since(start, func(ev recordedEvent) bool { return ev.kind == kindPod && ev.obj.GetName() == "web" })
		if err != nil {
			return false, "", err
		}
		for _, ev := range evs {
			if copiedUp(ev.obj) {
				t.Logf("copied up at rv %s, %s after the create: %s", ev.obj.GetResourceVersion(), ev.at.Sub(start).Round(time.Millisecond), brief(ev.obj))
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d virtual pod events, none with %s=true and app=platform", len(evs), hookedLabel), nil
	})
	settle(t, []*eventRecorder{hostEvents, virtualEvents}, func(ev recordedEvent) bool { return ev.kind == kindPod })
	for _, r := range []*eventRecorder{hostEvents, virtualEvents} {
		evs, err := r.since(start, func(ev recordedEvent) bool { return ev.typ == watch.Modified && ev.kind == kindPod })
		if err != nil {
			t.Fatal(err)
		}
		all, _ := r.since(time.Time{}, nil)
		t.Logf("%d pod updates in the %s cluster until they settled:%s", len(evs), r.cluster, describeUpdates(evs, all))
	}
	if lines := s.log.lines("loop detected"); len(lines) > 0 {
		t.Errorf("synchook logged loops:\n%s", strings.Join(lines, "\n"))
	}
}

// TestVClusterSyncerFailingHook: a hook that fails on the real sync path stops vcluster from
// creating the host object, vcluster's log names the hook, and the syncer restarted with the
// fixed config (a new config is a new vcluster pod, which starts the plugin again) creates it.
func TestVClusterSyncerFailingHook(t *testing.T) {
	cl := startClusters(t)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	const hookName = "team-label"
	hookConfig := func(value string) map[string]any {
		return map[string]any{"hooks": yamlList(t, fmt.Sprintf(`
- name: %s
  types: [CreatePhysical, UpdatePhysical]
  policy:
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingAdmissionPolicy
    metadata: {name: team-label}
    spec:
      failurePolicy: Fail
      reinvocationPolicy: Never
      matchConstraints:
        resourceRules:
          - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
      mutations:
        - patchType: JSONPatch
          jsonPatch:
            expression: '[JSONPatch{op: "add", path: "/metadata/labels/synchook.io~1team", value: %s}]'
`, hookName, value))}
	}
	// broken: the tenant's pods have no label team, so the expression fails at run time
	s := startSyncer(t, cl, syncerSpec{Plugins: []syncerPlugin{synchookFromPluginYAML(t, hookConfig(`object.metadata.labels["team"]`))}})
	ctx := t.Context()
	if _, err := cl.virtual.cs.CoreV1().Pods(tenantNS).Create(ctx, tenantPod("web", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("the host pod is not created and vcluster's log names the failing hook", func(t *testing.T) {
		var lines []string
		waitFor(t, time.Minute, "vcluster's log to name the hook", func(context.Context) (bool, string, error) {
			lines = s.log.lines("call plugin mutate", hookName)
			return len(lines) >= 2, fmt.Sprintf("%d lines", len(lines)), nil // 2: vcluster retried
		})
		t.Logf("vcluster logged (%d lines), first: %.600s", len(lines), lines[0])
		if o, err := hostObject(ctx, cl.host.cs, kindPod, "web"); err != nil || o != nil {
			t.Fatalf("host pod exists (%v) while its hook fails: %s", err, brief(o))
		}
		created, err := hostEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindPod && ev.typ == watch.Added })
		if err != nil {
			t.Fatal(err)
		}
		if len(created) > 0 {
			t.Errorf("host pods were created: %s", brief(created[0].obj))
		}
	})

	t.Run("restarted with the fixed config, vcluster creates the host pod with the hook's label", func(t *testing.T) {
		s.stop()
		startSyncer(t, cl, syncerSpec{Plugins: []syncerPlugin{synchookFromPluginYAML(t,
			hookConfig(`"team" in object.metadata.labels ? object.metadata.labels["team"] : "none"`))}})
		waitHost(t, cl, kindPod, "web", func(o object) string {
			if o.GetLabels()["synchook.io/team"] != "none" {
				return "no label synchook.io/team=none"
			}
			return ""
		})
	})
}
