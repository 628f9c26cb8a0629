package config_test

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

const imageConfig = `
hooks:
  - name: mirror
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical, GetPhysical]
    image:
      rules:
        - {from: docker.io, to: registry.internal/dockerhub}
        - {from: ghcr.io/org, to: mirror.example/org}
`

// The image hook's write reaches the host rewritten, the read gives the syncer the tenant's
// images back (the sealed undo) and maps the kubelet's report of the rewritten image back.
func TestImageHookRewritesAndTheReadGivesTheTenantsImagesBack(t *testing.T) {
	cfg, err := config.Parse([]byte(imageConfig))
	if err != nil {
		t.Fatal(err)
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
	if err := cfg.Build(reg); err != nil {
		t.Fatal(err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	tenant := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
		},
	}
	raw, _ := json.Marshal(tenant)
	res, err := reg.Mutate(t.Context(), gvk, hooks.CreatePhysical, raw)
	if err != nil {
		t.Fatal(err)
	}
	written, err := patch.Apply(raw, res.Patch)
	if err != nil {
		t.Fatal(err)
	}
	host := &corev1.Pod{}
	if err := json.Unmarshal(written, host); err != nil {
		t.Fatal(err)
	}
	if got := host.Spec.Containers[0].Image + " " + host.Spec.InitContainers[0].Image; got != "registry.internal/dockerhub/library/nginx:1.27 registry.internal/dockerhub/library/busybox" {
		t.Fatalf("host images %s", got)
	}
	host.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: "registry.internal/dockerhub/library/nginx:1.27"}}
	hostRaw, _ := json.Marshal(host)
	read, err := reg.Mutate(t.Context(), gvk, hooks.GetPhysical, hostRaw)
	if err != nil {
		t.Fatal(err)
	}
	back, err := patch.Apply(hostRaw, read.Patch)
	if err != nil {
		t.Fatal(err)
	}
	seen := &corev1.Pod{}
	if err := json.Unmarshal(back, seen); err != nil {
		t.Fatal(err)
	}
	if got := seen.Spec.Containers[0].Image + " " + seen.Spec.InitContainers[0].Image; got != "nginx:1.27 busybox" {
		t.Errorf("the read gives the syncer images %s, want the tenant's", got)
	}
	if got := seen.Status.ContainerStatuses[0].Image; got != "docker.io/library/nginx:1.27" {
		t.Errorf("the read reports status image %s, want docker.io/library/nginx:1.27", got)
	}
}

func TestImageHookRefusesBadRulesAndTypesNamingThem(t *testing.T) {
	_, err := config.Parse([]byte(`
hooks:
  - name: mirror
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdateVirtual]
    image:
      rules: [{from: ghcr.io, to: ghcr.io/mirror}]
`))
	for _, want := range []string{
		`hooks[0].image: Invalid value`, `rules[0].to "ghcr.io/mirror" and rules[0].from "ghcr.io" overlap`,
		`hooks[0].types[1]: Unsupported value: "UpdateVirtual"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
}
