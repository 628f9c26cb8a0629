package plugin

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/internal/engine"
)

// The chart tests render the real vcluster chart (the chart/ folder of the
// github.com/loft-sh/vcluster Go module) with `helm template` and our values files, and check
// what vcluster will run. hack/test.sh builds helm (hack/helm.sh), finds the chart
// (hack/vcluster-chart.sh) and passes both in these env vars; without them the tests skip.
const (
	chartHelmEnv  = "SYNCHOOK_HELM"
	chartDirEnv   = "SYNCHOOK_VCLUSTER_CHART"
	chartRelease  = "my-vc"
	chartNS       = "my-ns"
	chartPluginNS = "synchook" // the key under plugins: / plugin: in our values files
	// chartConfigSecret and chartConfigKey hold the whole vcluster config (the chart's values).
	chartConfigSecret = "vc-config-" + chartRelease
	chartConfigKey    = "config.yaml"
	// chartSyncer is the syncer's container in the chart's StatefulSet.
	chartSyncer = "syncer"
)

// renderedChart is the part of `helm template`'s output that the chart tests look at.
type renderedChart struct {
	statefulSet *appsv1.StatefulSet // the syncer's StatefulSet, named after the release
	secrets     map[string]*corev1.Secret
}

// renderChart runs `helm template` on the vcluster chart with valuesFile and decodes its
// output. It skips the test when hack/test.sh did not provide helm and the chart.
func renderChart(t *testing.T, valuesFile string) *renderedChart {
	t.Helper()
	helm, chart := os.Getenv(chartHelmEnv), os.Getenv(chartDirEnv)
	if helm == "" || chart == "" {
		t.Skipf("%s and %s are not set; hack/test.sh sets them (helm from hack/helm.sh, the vcluster chart dir from hack/vcluster-chart.sh)",
			chartHelmEnv, chartDirEnv)
	}
	cmd := exec.CommandContext(t.Context(), helm, "template", chartRelease, chart, "-n", chartNS, "-f", valuesFile)
	// Keep helm away from the user's repositories, plugins and cache.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}

	r := &renderedChart{secrets: map[string]*corev1.Secret{}}
	for doc := range strings.SplitSeq(stdout.String(), "\n---") {
		var meta struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("helm template printed a document that is not YAML: %v\n%s", err, doc)
		}
		switch {
		case meta.APIVersion == "apps/v1" && meta.Kind == "StatefulSet" && meta.Metadata.Name == chartRelease:
			r.statefulSet = &appsv1.StatefulSet{}
			if err := yaml.Unmarshal([]byte(doc), r.statefulSet); err != nil {
				t.Fatalf("StatefulSet %s: %v", meta.Metadata.Name, err)
			}
		case meta.APIVersion == "v1" && meta.Kind == "Secret":
			s := &corev1.Secret{}
			if err := yaml.Unmarshal([]byte(doc), s); err != nil {
				t.Fatalf("Secret %s: %v", meta.Metadata.Name, err)
			}
			r.secrets[s.Name] = s
		}
	}
	if r.statefulSet == nil {
		t.Fatalf("helm template rendered no StatefulSet %s", chartRelease)
	}
	return r
}

// pod is the StatefulSet's pod template spec.
func (r *renderedChart) pod() *corev1.PodSpec { return &r.statefulSet.Spec.Template.Spec }

// vclusterConfig returns the vcluster config (the chart's values) from the config Secret.
func (r *renderedChart) vclusterConfig(t *testing.T) []byte {
	t.Helper()
	s, ok := r.secrets[chartConfigSecret]
	if !ok {
		t.Fatalf("no Secret %s; Secrets: %v", chartConfigSecret, keysOfMap(r.secrets))
	}
	data, ok := s.Data[chartConfigKey]
	if !ok {
		t.Fatalf("Secret %s has no key %s; keys: %v", chartConfigSecret, chartConfigKey, keysOfMap(s.Data))
	}
	return data
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func findVolume(vs []corev1.Volume, name string) *corev1.Volume {
	for i := range vs {
		if vs[i].Name == name {
			return &vs[i]
		}
	}
	return nil
}

// mountAt returns c's volumeMount at path, or nil.
func mountAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// containerNames lists the names of cs, for messages.
func containerNames(cs []corev1.Container) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

func keysOfMap[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// chartValues is what the chart tests read from our values files.
type chartValues struct {
	Plugins map[string]struct {
		Image  string         `json:"image"`
		Config map[string]any `json:"config"`
	} `json:"plugins"`
	Plugin map[string]struct {
		Image string   `json:"image"`
		Args  []string `json:"args"`
	} `json:"plugin"`
}

func readChartValues(t *testing.T, file string) *chartValues {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	v := &chartValues{}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// parseAndBuild checks that cfgYAML is a synchook config that parses and builds a registry.
func parseAndBuild(t *testing.T, cfgYAML []byte) {
	t.Helper()
	cfg, err := config.Parse(cfgYAML)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, cfgYAML)
	}
	if len(cfg.Hooks) == 0 {
		t.Fatalf("the config has no hooks:\n%s", cfgYAML)
	}
	if err := cfg.Build(engine.NewRegistry(nil)); err != nil {
		t.Fatalf("Build: %v", err)
	}
}

// TestChartWithPluginYAML renders the vcluster chart with plugin.yaml (plugin v2): an init
// container installs synchook into the syncer's /plugins and the config reaches vcluster.
func TestChartWithPluginYAML(t *testing.T) {
	const file = "../plugin.yaml"
	r := renderChart(t, file)
	want := readChartValues(t, file).Plugins[chartPluginNS]
	pod := r.pod()

	t.Run("an init container named synchook installs our image's plugin into /plugins/synchook", func(t *testing.T) {
		c := findContainer(pod.InitContainers, chartPluginNS)
		if c == nil {
			t.Fatalf("no init container %s; init containers: %v", chartPluginNS, containerNames(pod.InitContainers))
		}
		if want.Image == "" || c.Image != want.Image {
			t.Errorf("image %q, want %q (plugins.synchook.image of %s)", c.Image, want.Image, file)
		}
		if wantCmd := []string{"/plugin/plugin"}; !slices.Equal(c.Command, wantCmd) {
			t.Errorf("command %q, want %q", c.Command, wantCmd)
		}
		if wantArgs := []string{"install", "/plugins/" + chartPluginNS}; !slices.Equal(c.Args, wantArgs) {
			t.Errorf("args %q, want %q", c.Args, wantArgs)
		}
		if mountAt(c, "/plugins") == nil {
			t.Errorf("no volumeMount at /plugins; mounts: %+v", c.VolumeMounts)
		}
	})

	t.Run("the syncer mounts the same /plugins volume, an emptyDir of the pod", func(t *testing.T) {
		syncer := findContainer(pod.Containers, chartSyncer)
		if syncer == nil {
			t.Fatalf("no container %s; containers: %v", chartSyncer, containerNames(pod.Containers))
		}
		m := mountAt(syncer, "/plugins")
		if m == nil {
			t.Fatalf("the syncer has no volumeMount at /plugins; mounts: %+v", syncer.VolumeMounts)
		}
		if init := findContainer(pod.InitContainers, chartPluginNS); init != nil {
			if im := mountAt(init, "/plugins"); im != nil && im.Name != m.Name {
				t.Errorf("the init container mounts volume %q at /plugins, the syncer %q", im.Name, m.Name)
			}
		}
		if v := findVolume(pod.Volumes, m.Name); v == nil || v.EmptyDir == nil {
			t.Errorf("volume %q is not an emptyDir of the pod: %+v", m.Name, v)
		}
	})

	t.Run("the config Secret carries our hook config unchanged, and it parses and builds", func(t *testing.T) {
		var vc struct {
			Plugins map[string]struct {
				Config map[string]any `json:"config"`
			} `json:"plugins"`
		}
		if err := yaml.Unmarshal(r.vclusterConfig(t), &vc); err != nil {
			t.Fatalf("Secret %s key %s: %v", chartConfigSecret, chartConfigKey, err)
		}
		got, ok := vc.Plugins[chartPluginNS]
		if !ok || got.Config == nil {
			t.Fatalf("the vcluster config has no plugins.%s.config", chartPluginNS)
		}
		if !reflect.DeepEqual(got.Config, want.Config) {
			t.Errorf("plugins.%s.config in the Secret differs from %s:\ngot  %v\nwant %v", chartPluginNS, file, got.Config, want.Config)
		}
		cfgYAML, err := yaml.Marshal(got.Config)
		if err != nil {
			t.Fatal(err)
		}
		parseAndBuild(t, cfgYAML)
	})

	t.Run("there is no synchook sidecar", func(t *testing.T) {
		if findContainer(pod.Containers, chartPluginNS) != nil {
			t.Errorf("containers %v include %s", containerNames(pod.Containers), chartPluginNS)
		}
	})
}

// TestChartWithPluginV1YAML renders the vcluster chart with plugin-v1.yaml (legacy plugin v1):
// synchook runs as a sidecar of the syncer with the chart's plugin env and a shared emptyDir.
func TestChartWithPluginV1YAML(t *testing.T) {
	const (
		file   = "../plugin-v1.yaml"
		shared = "synchook-shared"
	)
	r := renderChart(t, file)
	want := readChartValues(t, file).Plugin[chartPluginNS]
	pod := r.pod()
	sidecar := findContainer(pod.Containers, chartPluginNS)
	if sidecar == nil {
		t.Fatalf("no container %s; containers: %v", chartPluginNS, containerNames(pod.Containers))
	}
	syncer := findContainer(pod.Containers, chartSyncer)
	if syncer == nil {
		t.Fatalf("no container %s; containers: %v", chartSyncer, containerNames(pod.Containers))
	}

	t.Run("the sidecar runs our image with our serve args", func(t *testing.T) {
		if want.Image == "" || sidecar.Image != want.Image {
			t.Errorf("image %q, want %q (plugin.synchook.image of %s)", sidecar.Image, want.Image, file)
		}
		if len(sidecar.Command) != 0 {
			t.Errorf("command %q overrides the image's entrypoint", sidecar.Command)
		}
		if len(sidecar.Args) == 0 || sidecar.Args[0] != "serve" || !slices.Equal(sidecar.Args, want.Args) {
			t.Errorf("args %q, want %q (serve first)", sidecar.Args, want.Args)
		}
	})

	env := map[string]string{}
	for _, e := range sidecar.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("the sidecar's env sets %s twice", e.Name)
		}
		env[e.Name] = e.Value
	}
	for _, tc := range []struct{ name, value string }{
		{"VCLUSTER_PLUGIN_NAME", chartPluginNS},
		{"VCLUSTER_PLUGIN_ADDRESS", "localhost:14000"},
	} {
		t.Run("the chart sets "+tc.name+" to "+tc.value, func(t *testing.T) {
			if got, ok := env[tc.name]; !ok || got != tc.value {
				t.Errorf("%s=%q (set: %t), want %q", tc.name, got, ok, tc.value)
			}
		})
	}

	t.Run("the sidecar's "+config.EnvVar+" parses and builds", func(t *testing.T) {
		cfgYAML, ok := env[config.EnvVar]
		if !ok {
			t.Fatalf("the sidecar's env has no %s", config.EnvVar)
		}
		parseAndBuild(t, []byte(cfgYAML))
	})

	t.Run("the synchook-shared emptyDir is a pod volume that the syncer and the sidecar mount", func(t *testing.T) {
		if v := findVolume(pod.Volumes, shared); v == nil || v.EmptyDir == nil {
			t.Errorf("volume %s is not an emptyDir of the pod: %+v", shared, v)
		}
		for _, c := range []*corev1.Container{syncer, sidecar} {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == shared }) {
				t.Errorf("container %s does not mount %s; mounts: %+v", c.Name, shared, c.VolumeMounts)
			}
		}
	})

	t.Run("synchook is not also loaded as a v2 plugin", func(t *testing.T) {
		if findContainer(pod.InitContainers, chartPluginNS) != nil {
			t.Errorf("init containers %v include %s", containerNames(pod.InitContainers), chartPluginNS)
		}
		if mountAt(syncer, "/plugins") != nil {
			t.Error("the syncer mounts /plugins")
		}
	})
}
