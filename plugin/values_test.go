package plugin

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/internal/engine"
)

// pluginSidecar is what plugin.yaml may set for a legacy plugin, per the vcluster chart's
// values schema (DESIGN.md, "vcluster chart facts"). Decoding strictly into it rejects every
// other key, and the Kubernetes types check the shape of probes, env, mounts and the rest.
type pluginSidecar struct {
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy,omitempty"`
	Name            string                      `json:"name,omitempty"`
	Env             []corev1.EnvVar             `json:"env,omitempty"`
	EnvFrom         []corev1.EnvFromSource      `json:"envFrom,omitempty"`
	LivenessProbe   *corev1.Probe               `json:"livenessProbe,omitempty"`
	ReadinessProbe  *corev1.Probe               `json:"readinessProbe,omitempty"`
	StartupProbe    *corev1.Probe               `json:"startupProbe,omitempty"`
	Resources       corev1.ResourceRequirements `json:"resources,omitempty"`
	VolumeMounts    []corev1.VolumeMount        `json:"volumeMounts,omitempty"`
	SecurityContext *corev1.SecurityContext     `json:"securityContext,omitempty"`
	Lifecycle       *corev1.Lifecycle           `json:"lifecycle,omitempty"`
	Command         []string                    `json:"command,omitempty"`
	Args            []string                    `json:"args,omitempty"`
	WorkingDir      string                      `json:"workingDir,omitempty"`
	Optional        bool                        `json:"optional,omitempty"`
	Config          map[string]any              `json:"config,omitempty"`
	RBAC            map[string]any              `json:"rbac,omitempty"`
}

type pluginValues struct {
	ControlPlane struct {
		StatefulSet struct {
			Persistence struct {
				AddVolumes      []corev1.Volume      `json:"addVolumes"`
				AddVolumeMounts []corev1.VolumeMount `json:"addVolumeMounts"`
			} `json:"persistence"`
		} `json:"statefulSet"`
	} `json:"controlPlane"`
}

// forbiddenPluginKeys make helm fail (ports, volumeDevices, terminationMessage*) or change how
// vcluster treats the plugin (version).
var forbiddenPluginKeys = []string{"ports", "version", "volumeDevices", "terminationMessagePath", "terminationMessagePolicy"}

// reservedPorts are used by the syncer, etcd and vcluster's plugin machinery in the same pod.
func reservedPort(p int) bool {
	return slices.Contains([]int{6443, 8443, 10099, 2379, 2380, 10257, 10259}, p) || (p >= 14000 && p < 14100)
}

// TestPluginV1YAMLIsAValidVClusterSidecar checks plugin-v1.yaml without helm: the keys the chart
// accepts, an env config that parses, flags that `synchook serve` has, probes on the port the
// probe listener serves, mounts of volumes the pod has and a writable cert dir.
func TestPluginV1YAMLIsAValidVClusterSidecar(t *testing.T) {
	data, err := os.ReadFile("../plugin-v1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Plugin map[string]map[string]any `json:"plugin"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.Plugin["synchook"]; !ok || len(raw.Plugin) != 1 {
		t.Fatalf("plugin: keys %v, want exactly synchook", keysOf(raw.Plugin))
	}
	for _, k := range forbiddenPluginKeys {
		if _, ok := raw.Plugin["synchook"][k]; ok {
			t.Errorf("plugin.synchook.%s is set; the chart rejects it or vcluster stops waiting for the plugin", k)
		}
	}
	var values pluginValues
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	entry, err := yaml.Marshal(raw.Plugin["synchook"])
	if err != nil {
		t.Fatal(err)
	}
	var sc pluginSidecar
	if err := yaml.UnmarshalStrict(entry, &sc); err != nil {
		t.Fatalf("plugin.synchook has a key the chart's plugin schema does not accept: %v", err)
	}

	t.Run("the sidecar has an image and its name is the plugin key", func(t *testing.T) {
		if sc.Image == "" {
			t.Error("no image")
		}
		if sc.Name != "" && sc.Name != "synchook" {
			t.Errorf("name %q, want it unset or synchook", sc.Name)
		}
		if p := sc.ImagePullPolicy; p != "" && p != corev1.PullAlways && p != corev1.PullIfNotPresent && p != corev1.PullNever {
			t.Errorf("imagePullPolicy %q", p)
		}
	})

	t.Run("the env carries a config that parses and builds, and leaves the chart's env alone", func(t *testing.T) {
		var cfgText string
		for _, e := range sc.Env {
			switch e.Name {
			case config.EnvVar:
				cfgText = e.Value
			case "VCLUSTER_PLUGIN_ADDRESS", "VCLUSTER_PLUGIN_NAME":
				t.Errorf("env sets %s, which the chart sets", e.Name)
			}
		}
		cfg, err := config.Parse([]byte(cfgText))
		if err != nil {
			t.Fatalf("%s: %v", config.EnvVar, err)
		}
		if err := cfg.Build(engine.NewRegistry(nil)); err != nil {
			t.Fatalf("%s builds no registry: %v", config.EnvVar, err)
		}
	})

	fs, _, _ := serveFlags(os.Getenv)
	fs.SetOutput(&strings.Builder{})
	t.Run("the args are serve and flags that synchook serve --help lists", func(t *testing.T) {
		if len(sc.Command) != 0 {
			t.Errorf("command %v overrides the image's entrypoint", sc.Command)
		}
		if len(sc.Args) == 0 || sc.Args[0] != "serve" {
			t.Fatalf("args %v, want serve first", sc.Args)
		}
		code, help, _ := runCLI(t, "serve", "--help")
		if code != 0 {
			t.Fatalf("serve --help exit %d", code)
		}
		for _, a := range sc.Args[1:] {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !strings.Contains(help, "  --"+name+" ") && !strings.Contains(help, "  --"+name+"\n") {
				t.Errorf("arg %q: synchook serve --help has no --%s", a, name)
			}
		}
		if err := fs.Parse(sc.Args[1:]); err != nil {
			t.Errorf("serve does not accept %v: %v", sc.Args[1:], err)
		}
	})

	t.Run("the probes reach /healthz and /readyz on the probe listener's port", func(t *testing.T) {
		probeAddr := fs.Lookup("health-probe-bind-address").Value.String()
		host, portText, err := net.SplitHostPort(probeAddr)
		if err != nil || probeAddr == "0" {
			t.Fatalf("--health-probe-bind-address=%q: the probe listener is off or malformed", probeAddr)
		}
		if host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("probe listener on %q: kubelet probes reach the pod IP, not loopback", host)
		}
		port, _ := strconv.Atoi(portText)
		for name, p := range map[string]struct {
			probe *corev1.Probe
			path  string
		}{"livenessProbe": {sc.LivenessProbe, "/healthz"}, "readinessProbe": {sc.ReadinessProbe, "/readyz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s: no httpGet probe", name)
				continue
			}
			if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.IntValue() != port {
				t.Errorf("%s: %s on port %s, want %s on %d", name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, port)
			}
		}
	})

	t.Run("no listener uses a port of the syncer, etcd or the plugin machinery", func(t *testing.T) {
		for _, flagName := range []string{"bind-address", "health-probe-bind-address"} {
			_, portText, _ := net.SplitHostPort(fs.Lookup(flagName).Value.String())
			if p, _ := strconv.Atoi(portText); reservedPort(p) {
				t.Errorf("--%s uses reserved port %d", flagName, p)
			}
		}
	})

	t.Run("every mount has a volume in the pod and the cert dir is on one", func(t *testing.T) {
		pers := values.ControlPlane.StatefulSet.Persistence
		volumes := map[string]bool{}
		for _, v := range pers.AddVolumes {
			volumes[v.Name] = true
		}
		for _, m := range append(slices.Clone(sc.VolumeMounts), pers.AddVolumeMounts...) {
			if !volumes[m.Name] {
				t.Errorf("volumeMount %q has no volume in controlPlane.statefulSet.persistence.addVolumes", m.Name)
			}
		}
		certDir := fs.Lookup("cert-dir").Value.String()
		onMount := false
		for _, m := range sc.VolumeMounts {
			if rel, err := filepath.Rel(m.MountPath, certDir); err == nil && !strings.HasPrefix(rel, "..") && !m.ReadOnly {
				onMount = true
			}
		}
		if !onMount {
			t.Errorf("--cert-dir=%s is on no writable volumeMount (the root filesystem is read-only)", certDir)
		}
	})

	t.Run("the container runs as non-root on a read-only root filesystem", func(t *testing.T) {
		s := sc.SecurityContext
		if s == nil || s.RunAsNonRoot == nil || !*s.RunAsNonRoot || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem ||
			s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
			t.Errorf("securityContext %+v", s)
		}
	})
}

func keysOf[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// pluginV2 is what plugin.yaml may set for a plugins: entry, per the vcluster chart's values
// schema (Plugins: name, image, imagePullPolicy, config, rbac, command, args, securityContext,
// resources, volumeMounts).
type pluginV2 struct {
	Name            string                      `json:"name,omitempty"`
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy,omitempty"`
	Config          map[string]any              `json:"config,omitempty"`
	RBAC            map[string]any              `json:"rbac,omitempty"`
	Command         []string                    `json:"command,omitempty"`
	Args            []string                    `json:"args,omitempty"`
	SecurityContext *corev1.SecurityContext     `json:"securityContext,omitempty"`
	Resources       corev1.ResourceRequirements `json:"resources,omitempty"`
	VolumeMounts    []corev1.VolumeMount        `json:"volumeMounts,omitempty"`
}

// TestPluginYAMLIsAValidVClusterPluginV2 checks plugin.yaml without helm (chart_test.go renders
// it with the real chart): one plugins: entry whose keys the chart accepts, an init container
// command that installs the binary where vcluster loads it, and a config that parses and builds.
func TestPluginYAMLIsAValidVClusterPluginV2(t *testing.T) {
	data, err := os.ReadFile("../plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 1 || len(raw["plugins"]) != 1 || raw["plugins"]["synchook"] == nil {
		t.Fatalf("plugin.yaml: want exactly plugins.synchook at the top, got %s", data)
	}
	var p pluginV2
	if err := yaml.UnmarshalStrict(raw["plugins"]["synchook"], &p); err != nil {
		t.Fatalf("plugins.synchook has a key the chart's Plugins schema does not accept: %v", err)
	}

	t.Run("the init container runs install into /plugins/synchook with the image's binary", func(t *testing.T) {
		if p.Image == "" {
			t.Error("no image")
		}
		if !slices.Equal(p.Command, []string{"/plugin/plugin"}) || !slices.Equal(p.Args, []string{"install", "/plugins/synchook"}) {
			t.Errorf("command %v args %v, want [/plugin/plugin] [install /plugins/synchook]", p.Command, p.Args)
		}
		dir := filepath.Join(t.TempDir(), "plugins", "synchook")
		if code, _, errOut := runCLI(t, "install", dir); code != 0 {
			t.Fatalf("install exit %d: %s", code, errOut)
		}
		if st, err := os.Stat(filepath.Join(dir, "plugin")); err != nil || st.Mode().Perm()&0o111 == 0 {
			t.Errorf("installed plugin: %v, %v", st, err)
		}
	})

	t.Run("the config parses and builds as PLUGIN_CONFIG YAML", func(t *testing.T) {
		cfgYAML, err := yaml.Marshal(p.Config)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(cfgYAML)
		if err != nil {
			t.Fatalf("config: %v", err)
		}
		if err := cfg.Build(engine.NewRegistry(nil)); err != nil {
			t.Fatalf("config builds no registry: %v", err)
		}
	})

	t.Run("the commented examples parse and build once uncommented", func(t *testing.T) {
		_, examples, ok := strings.Cut(string(data), "# More, uncomment to use")
		if !ok {
			t.Fatal("plugin.yaml has no commented examples")
		}
		var entries []string
		for _, line := range strings.Split(examples, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "# "); ok && (strings.HasPrefix(rest, "- ") || strings.HasPrefix(rest, "  ")) {
				entries = append(entries, "  "+rest)
			}
		}
		if len(entries) == 0 {
			t.Fatal("no example entries found")
		}
		cfg, err := config.Parse([]byte("hooks:\n" + strings.Join(entries, "\n")))
		if err != nil {
			t.Fatalf("examples: %v", err)
		}
		if len(cfg.Hooks) < 2 {
			t.Fatalf("examples: %d entries, want every example", len(cfg.Hooks))
		}
		if err := cfg.Build(engine.NewRegistry(nil)); err != nil {
			t.Fatalf("examples build no registry: %v", err)
		}
	})
}

func TestInstallNeedsExactlyOneDirectory(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"install"}, "plugin directory"},
		{[]string{"install", "a", "b"}, "plugin directory"},
		{[]string{"install", "--force"}, "unknown flag: --force"},
	} {
		if code, _, errOut := runCLI(t, tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
