package vcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// namespaceHooks copy the tenant namespace's team label onto the host pods synced out of it
// (issue 34, vcluster #748).
const namespaceHooks = `
- name: team-from-namespace
  resources: [{apiVersion: v1, kind: Pod}]
  types: [CreatePhysical, UpdatePhysical]
  labels:
    fromNamespace: {keys: [team]}
`

// otherNS is a second tenant namespace, without a team label.
const otherNS = "team-b"

// waitHostPodIn waits for the host twin of the virtual pod ns/name to satisfy ok ("" when it
// does, else what is missing).
func waitHostPodIn(tb testing.TB, cl *clusters, ns, name string, ok func(*corev1.Pod) string) *corev1.Pod {
	tb.Helper()
	var found *corev1.Pod
	waitFor(tb, 60*time.Second, fmt.Sprintf("host pod of %s/%s", ns, name), func(ctx context.Context) (bool, string, error) {
		pods, err := cl.host.cs.CoreV1().Pods(hostNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Annotations[objectNameAnnotation] == name && p.Annotations[objectNamespaceAnnotation] == ns {
				if why := ok(p); why != "" {
					return false, why, nil
				}
				found = p
				return true, "", nil
			}
		}
		return false, "not synced", nil
	})
	return found
}

// TestVClusterSyncerLabelsFromNamespace runs vcluster's syncer with a labels hook that copies the
// team label of the tenant's namespace (fromNamespace) onto host pods.
func TestVClusterSyncerLabelsFromNamespace(t *testing.T) {
	cl := startClusters(t)
	ctx := t.Context()
	v := cl.virtual.cs.CoreV1()
	for _, err := range []error{ // before the syncer's bootstrap, which leaves existing namespaces alone
		ignoreExists(v.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, Labels: map[string]string{"team": "payments"}}}, metav1.CreateOptions{})),
		ignoreExists(v.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}}, metav1.CreateOptions{})),
		ignoreExists(v.ServiceAccounts(otherNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	otherEvents := recordEvents(t, cl.virtual, otherNS)
	cfg := map[string]any{"hooks": append(pluginYAMLHooks(t), yamlList(t, namespaceHooks)...)}
	startSyncer(t, cl, syncerSpec{Plugins: []syncerPlugin{synchookFromPluginYAML(t, cfg)}})

	paid := tenantPod("paid", "")
	free := tenantPod("free", "")
	free.Namespace = otherNS
	forger := tenantPod("forger", "") // in team-b, claiming team-a in the annotations a tenant can set
	forger.Namespace = otherNS
	forger.Annotations = map[string]string{"vcluster.loft.sh/namespace": tenantNS, objectNamespaceAnnotation: tenantNS}
	for _, p := range []*corev1.Pod{paid, free, forger} {
		if _, err := v.Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a host pod from the namespace labelled team=payments carries team=payments; pods from another namespace do not, whatever their annotations say", func(t *testing.T) {
		waitHostPodIn(t, cl, tenantNS, "paid", func(p *corev1.Pod) string {
			if p.Labels["team"] != "payments" {
				return fmt.Sprintf("labels %v", p.Labels)
			}
			return ""
		})
		for _, name := range []string{"free", "forger"} {
			hp := waitHostPodIn(t, cl, otherNS, name, func(p *corev1.Pod) string {
				if p.Labels[hookedLabel] != "true" { // plugin.yaml's pod-labels: the write chain ran
					return "not hooked yet"
				}
				return ""
			})
			if team, ok := hp.Labels["team"]; ok {
				t.Errorf("host pod of %s/%s has team=%s, from a namespace it did not come from", otherNS, name, team)
			}
		}
	})

	t.Run("the tenant changes the namespace label: the next write of the pod carries the new value", func(t *testing.T) {
		if _, err := v.Namespaces().Patch(ctx, tenantNS, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"payments-eu"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// the next write: a change of the virtual pod (the cache may take a moment to see the
		// namespace change, so each try writes again)
		attempt := 0
		waitFor(t, 60*time.Second, "the host pod's team label after the namespace changed", func(ctx context.Context) (bool, string, error) {
			attempt++
			patch := fmt.Sprintf(`{"metadata":{"labels":{"step":"%d"}}}`, attempt)
			if _, err := v.Pods(tenantNS).Patch(ctx, "paid", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return false, "", err
			}
			hp := waitHostPodIn(t, cl, tenantNS, "paid", func(p *corev1.Pod) string {
				if p.Labels["step"] != fmt.Sprint(attempt) {
					return "step not synced"
				}
				return ""
			})
			return hp.Labels["team"] == "payments-eu", fmt.Sprintf("team=%s", hp.Labels["team"]), nil
		})
	})

	t.Run("the virtual pods never showed the namespace's label", func(t *testing.T) {
		settleObjects(t, []*eventRecorder{virtualEvents}, kindPod, "paid")
		for _, r := range []*eventRecorder{virtualEvents, otherEvents} {
			evs, err := r.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindPod })
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if team, ok := ev.obj.GetLabels()["team"]; ok {
					t.Errorf("virtual pod %s/%s showed team=%s at rv %s", ev.obj.GetNamespace(), ev.obj.GetName(), team, ev.obj.GetResourceVersion())
				}
			}
		}
	})
}
