package vcluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// imageHooks are plugin.yaml's commented examples (issue 34): the mirror and the wildcard strip
// of matchLabelKeys.
const imageHooks = `
- name: mirror
  resources: [{apiVersion: v1, kind: Pod}]
  types: [CreatePhysical, UpdatePhysical, GetPhysical]
  image:
    rules:
      - {from: docker.io, to: registry.internal/dockerhub}
      - {from: ghcr.io/org, to: mirror.example/org}
- name: strip-match-label-keys
  resources: [{apiVersion: v1, kind: Pod}]
  types: [CreatePhysical, UpdatePhysical]
  strip:
    paths: ["/spec/topologySpreadConstraints/*/matchLabelKeys"]
`

const mirroredNginx = "registry.internal/dockerhub/library/nginx"

// imagesOf returns the images of a pod's init containers and containers, in that order.
func imagesOf(p *corev1.Pod) []string {
	var out []string
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		out = append(out, c.Image)
	}
	return out
}

// TestVClusterSyncerImageRewriteAndWildcardStrip runs vcluster's syncer with plugin.yaml's hooks
// and its commented image and wildcard strip examples: the host pod pulls through the mirror and
// has no matchLabelKeys, the tenant's pod keeps its own images and constraints, a tenant's image
// change reaches the host rewritten, and nothing loops.
func TestVClusterSyncerImageRewriteAndWildcardStrip(t *testing.T) {
	cl := startClusters(t)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	recorders := []*eventRecorder{hostEvents, virtualEvents}
	cfg := map[string]any{"hooks": append(pluginYAMLHooks(t), yamlList(t, imageHooks)...)}
	s := startSyncer(t, cl, syncerSpec{Plugins: []syncerPlugin{synchookFromPluginYAML(t, cfg)}})

	ctx := t.Context()
	v := cl.virtual.cs.CoreV1()
	p := tenantPod("mirrored", "")
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
		{
			MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mirrored"}}, MatchLabelKeys: []string{"pod-template-hash"},
		},
		{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mirrored"}}, MatchLabelKeys: []string{"pod-template-hash"},
		},
	}
	if _, err := v.Pods(tenantNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("the host pod pulls nginx:1.27 and busybox through the mirror and has no matchLabelKeys", func(t *testing.T) {
		hp := waitHost(t, cl, kindPod, "mirrored", func(o object) string {
			if got := strings.Join(imagesOf(o.(*corev1.Pod)), " "); got != "registry.internal/dockerhub/library/busybox "+mirroredNginx+":1.27" {
				return "host images " + got
			}
			return ""
		}).(*corev1.Pod)
		if len(hp.Spec.TopologySpreadConstraints) != 2 {
			t.Fatalf("host constraints %+v, want the tenant's two", hp.Spec.TopologySpreadConstraints)
		}
		for i, c := range hp.Spec.TopologySpreadConstraints {
			if len(c.MatchLabelKeys) > 0 || c.TopologyKey == "" {
				t.Errorf("host constraint %d %+v: want matchLabelKeys stripped and the rest kept", i, c)
			}
		}
	})

	t.Run("the tenant's pod keeps its images and its matchLabelKeys", func(t *testing.T) {
		settleObjects(t, recorders, kindPod, "mirrored")
		vp, err := v.Pods(tenantNS).Get(ctx, "mirrored", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(imagesOf(vp), " "); got != "busybox nginx:1.27" {
			t.Errorf("virtual images %s, want the tenant's", got)
		}
		for i, c := range vp.Spec.TopologySpreadConstraints {
			if !slices.Contains(c.MatchLabelKeys, "pod-template-hash") {
				t.Errorf("virtual constraint %d lost matchLabelKeys: %+v", i, c)
			}
		}
	})

	t.Run("the tenant changes the image: the host gets the new image rewritten", func(t *testing.T) {
		patch := `{"spec":{"containers":[{"name":"app","image":"nginx:1.28"}]}}`
		if _, err := v.Pods(tenantNS).Patch(ctx, "mirrored", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitHost(t, cl, kindPod, "mirrored", func(o object) string {
			if got := o.(*corev1.Pod).Spec.Containers[0].Image; got != mirroredNginx+":1.28" {
				return "host image " + got
			}
			return ""
		})
		requireRequests(t, s, map[string][]string{"v1/Pod": {"CreatePhysical", "UpdatePhysical", "GetPhysical"}})
	})

	t.Run("no loop in the window, and the virtual pod never showed a rewritten image", func(t *testing.T) {
		hooked := func(ev recordedEvent) bool {
			return ev.typ == watch.Modified && ev.kind == kindPod &&
				(ev.obj.GetNamespace() == tenantNS || ev.obj.GetAnnotations()[objectNamespaceAnnotation] == tenantNS)
		}
		requireNoLoop(t, s, recorders, hooked)
		evs, err := virtualEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindPod && ev.obj.GetName() == "mirrored" })
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			for _, img := range imagesOf(ev.obj.(*corev1.Pod)) {
				if strings.HasPrefix(img, "registry.internal/") {
					t.Errorf("the virtual pod showed the rewritten image %s at rv %s", img, ev.obj.GetResourceVersion())
				}
			}
		}
	})
}
