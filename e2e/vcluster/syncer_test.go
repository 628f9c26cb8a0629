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
	"errors"
	"fmt"
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
			o, err := virtualObject(ctx, cl.virtual.cs, kind, name)
			if err != nil || o == nil {
				t.Fatalf("virtual %s %s: %v", kind, name, err)
			}
			if tr := hookTraces(o, traceLabels, traceAnnotations); len(tr) > 0 {
				t.Errorf("virtual %s %s shows what the hooks added: %v", kind, name, tr)
			}
		}
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
		vp := waitVirtual(t, cl, kindPod, "web", nil)
		if tr := hookTraces(vp, traceLabels, traceAnnotations); len(tr) > 0 {
			t.Errorf("virtual pod shows what the hooks added: %v", tr)
		}
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
		vp := waitVirtual(t, cl, kindPod, "web", func(o object) string {
			if o.(*corev1.Pod).Status.PodIP != "10.244.0.9" {
				return "the host pod's status did not reach the virtual pod"
			}
			return ""
		}).(*corev1.Pod)
		if vp.Status.HostIP != "" || len(vp.Status.HostIPs) > 0 {
			t.Errorf("the virtual pod shows the host's address: hostIP %q, hostIPs %v", vp.Status.HostIP, vp.Status.HostIPs)
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
		hp := waitHost(t, cl, kindPod, "forged", nil)
		// a later tenant change that must reach the host: the syncer has read the host pod
		// (through GetPhysical) since it was created
		if _, err := v.Pods(tenantNS).Patch(ctx, "forged", types.MergePatchType, []byte(`{"metadata":{"labels":{"step":"2"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		hp = waitHost(t, cl, kindPod, "forged", func(o object) string {
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
		for _, where := range []string{"host", "virtual"} {
			o := hp
			if where == "virtual" {
				o = waitVirtual(t, cl, kindPod, "forged", nil)
			}
			if v, ok := o.GetLabels()["forged.example.com/by"]; ok {
				broken = append(broken, fmt.Sprintf("%s pod has the label forged.example.com/by=%s that only the forged undo names: the syncer read it and wrote it back", where, v))
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
		settle(t, []*eventRecorder{hostEvents, virtualEvents}, hooked)
		window := noLoopWindow(t)
		start := time.Now()
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(window): // the measurement window, not a synchronisation
		}
		for _, r := range []*eventRecorder{hostEvents, virtualEvents} {
			evs, err := r.since(start, hooked)
			if err != nil {
				t.Fatal(err)
			}
			all, _ := r.since(time.Time{}, nil)
			if len(evs) > 0 {
				t.Errorf("%d updates of hooked objects in the %s cluster within %s after they settled:%s", len(evs), r.cluster, window, describeUpdates(evs, all))
			}
		}
		if lines := s.log.lines("loop detected"); len(lines) > 0 {
			t.Errorf("synchook logged loops:\n%s", strings.Join(lines, "\n"))
		}
	})

	t.Run("synchook_loops_detected_total stays 0", func(t *testing.T) {
		loops, err := s.metricSum(ctx, "synchook_loops_detected_total")
		if errors.Is(err, errNoMetrics) {
			// synchook before ad3f489 recorded no metrics and detected no loops under plugin v2
			t.Skipf("this synchook serves no metrics under plugin v2 (%s): %v", envMetricsBindAddress, err)
		}
		if err != nil {
			t.Fatal(err)
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

// TestVClusterSyncerWithoutUndo is the contrast of TestVClusterSyncer's no-loop and "virtual
// objects never show" cases: a labels hook with undo: false, so the syncer reads back what the
// hook added. It must show a difference, or those cases could not fail: updates that keep
// coming (a loop) or the hook's change in the tenant's view. What vcluster v0.36.1 does: no
// loop (its write path runs the hook before every write, so the written object already has the
// label), but its three-way metadata merge sees a host label the tenant did not set and copies
// it into the virtual pod, overwriting the tenant's own value of a label the hook also sets
// (one update on each side). With undo the GetPhysical view never shows the label and nothing
// is copied.
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
	window := noLoopWindow(t)
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(window): // measurement
	}
	updates := func(ev recordedEvent) bool { return ev.typ == watch.Modified && ev.kind == kindPod }
	var total int
	for _, r := range []*eventRecorder{hostEvents, virtualEvents} {
		evs, err := r.since(start, updates)
		if err != nil {
			t.Fatal(err)
		}
		all, _ := r.since(time.Time{}, nil)
		total += len(evs)
		t.Logf("%d pod updates in the %s cluster in the %s after the pod was created:%s", len(evs), r.cluster, time.Since(start).Round(time.Millisecond), describeUpdates(evs, all))
	}
	vp := waitVirtual(t, cl, kindPod, "web", nil)
	leaked := hookTraces(vp, []string{hookedLabel}, nil)
	if vp.GetLabels()["app"] == "platform" {
		leaked = append(leaked, "label app=platform (the hook's value)")
	}
	t.Logf("virtual pod: %s", brief(vp))
	if total == 0 && len(leaked) == 0 {
		t.Errorf("without undo, no update and nothing of the hook in the virtual pod: this contrast cannot tell undo from no undo")
	}
	if len(leaked) > 0 {
		t.Logf("without undo the tenant sees the hook's change: %v", leaked)
	}
	if lines := s.log.lines("loop detected"); len(lines) > 0 {
		t.Logf("synchook logged:\n%s", strings.Join(lines, "\n"))
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
