package vcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	vclusterconfig "github.com/loft-sh/vcluster/config"
	"github.com/loft-sh/vcluster/pkg/config"
	v2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// Binaries the harness can build, by name.
const (
	binSynchook = "synchook" // the repository root, github.com/synchook/synchook
	binSDK      = "sdkplugin"
	binEcho     = "echoplugin"
	binSDKV1    = "sdkpluginv1" // the sdk-style plugin v1 of TestV1Throughput
)

// Environment variables of the harness.
const (
	// envSynchookBinary names an already built synchook binary to load instead of building
	// the repository root.
	envSynchookBinary = "SYNCHOOK_BINARY"
	// envSynchookRepo is the synchook repository to build; default: two directories up.
	envSynchookRepo = "SYNCHOOK_REPO"
)

// buildDir holds the binaries built for this test binary run; set by TestMain.
var buildDir string

func TestMain(m *testing.M) {
	if os.Getenv(envSyncerProcess) != "" {
		// a copy of this binary started by startSyncer: be vcluster's syncer
		os.Exit(runSyncerProcess())
	}
	dir, err := os.MkdirTemp("", "synchook-e2e-vcluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type buildResult struct {
	once sync.Once
	path string
	err  error
}

var builds = map[string]*buildResult{binSynchook: {}, binSDK: {}, binEcho: {}, binSDKV1: {}}

// binary returns the path of the named binary, building it on first use (once per test binary
// run; a failed build fails every caller with the same error).
func binary(tb testing.TB, name string) string {
	tb.Helper()
	b, ok := builds[name]
	if !ok {
		tb.Fatalf("unknown binary %q", name)
	}
	b.once.Do(func() { b.path, b.err = build(name) })
	if b.err != nil {
		tb.Fatalf("build %s: %v", name, b.err)
	}
	return b.path
}

// build runs `go build` for the named binary into buildDir.
func build(name string) (string, error) {
	if name == binSynchook {
		if bin := os.Getenv(envSynchookBinary); bin != "" {
			return filepath.Abs(bin)
		}
	}
	out := filepath.Join(buildDir, name)
	var dir, pkg string
	switch name {
	case binSynchook:
		repo := os.Getenv(envSynchookRepo)
		if repo == "" {
			repo = filepath.Join("..", "..")
		}
		var err error
		if dir, err = filepath.Abs(repo); err != nil {
			return "", err
		}
		pkg = "."
	default:
		dir, pkg = ".", "./internal/"+name
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	start := time.Now()
	output, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -o %s %s in %s: %w\n%s", out, pkg, dir, err, output)
	}
	fmt.Fprintf(os.Stderr, "built %s in %s\n", name, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// pluginSpec is one plugin in a manager's plugin folder.
type pluginSpec struct {
	// Dir is the plugin's directory in the plugin folder; vcluster uses it as the plugin's name
	// (the key of vConfig.Plugins, whose Config becomes PLUGIN_CONFIG) and loads plugins in
	// the order of their directory names.
	Dir string
	// Binary is the binary copied to <plugin folder>/<Dir>/plugin.
	Binary string
	// Config, when not nil, is set as vConfig.Plugins[Dir].Config.
	Config map[string]any
}

// startManager lays out a plugin folder in a fresh temporary directory, creates vcluster's
// plugin v2 manager on it and starts it as the syncer does. The plugins that were loaded are
// killed when tb ends, also when Start fails. Start's error is returned.
func startManager(ctx context.Context, tb testing.TB, specs ...pluginSpec) (*v2.Manager, error) {
	tb.Helper()
	folder := filepath.Join(tb.TempDir(), "plugins")
	vConfig := newVirtualClusterConfig()
	for _, s := range specs {
		dir := filepath.Join(folder, s.Dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := linkOrCopy(s.Binary, filepath.Join(dir, "plugin")); err != nil {
			tb.Fatal(err)
		}
		if s.Config != nil {
			vConfig.Plugins[s.Dir] = vclusterconfig.Plugins{Config: s.Config}
		}
	}

	// The manager's Initialize names no reachable host (syncerConfig), so synchook cannot
	// keep its undo key in a Secret: it reads one from a file, named in the environment the
	// manager passes on (without a key a hooked write is refused).
	if os.Getenv("SYNCHOOK_UNDO_KEY_FILE") == "" {
		sealWithKey(tb)
	}
	m := v2.NewManager()
	m.PluginFolder = folder
	tb.Cleanup(func() { killPlugins(m) })
	err := m.Start(ctx, syncerConfig(), vConfig)
	return m, err
}

// mustStartManager is startManager that fails tb when Start fails.
func mustStartManager(ctx context.Context, tb testing.TB, specs ...pluginSpec) *v2.Manager {
	tb.Helper()
	m, err := startManager(ctx, tb, specs...)
	if err != nil {
		tb.Fatalf("start vcluster's plugin manager: %v", err)
	}
	if len(m.Plugins) != len(specs) {
		tb.Fatalf("manager loaded %d plugins, want %d", len(m.Plugins), len(specs))
	}
	return m
}

// killPlugins stops the plugin processes the manager started.
func killPlugins(m *v2.Manager) {
	var wg sync.WaitGroup
	for _, p := range m.Plugins {
		wg.Go(p.Client.Kill)
	}
	wg.Wait()
}

// newVirtualClusterConfig returns the smallest config Manager.Start accepts: it json-encodes
// it, converts it with LegacyOptions and turns HostConfig into kubeconfigs for the plugin; no
// apiserver is contacted.
func newVirtualClusterConfig() *config.VirtualClusterConfig {
	vConfig := &config.VirtualClusterConfig{
		Name:          "e2e",
		HostNamespace: "vcluster-e2e",
		HostConfig:    &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "dummy"},
	}
	vConfig.Plugins = map[string]vclusterconfig.Plugins{}
	return vConfig
}

// syncerConfig returns a dummy kubeconfig for the virtual cluster's syncer.
func syncerConfig() *clientcmdapi.Config {
	c := clientcmdapi.NewConfig()
	c.Clusters["vcluster"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:8443", InsecureSkipTLSVerify: true}
	c.AuthInfos["vcluster"] = &clientcmdapi.AuthInfo{Token: "dummy"}
	c.Contexts["vcluster"] = &clientcmdapi.Context{Cluster: "vcluster", AuthInfo: "vcluster"}
	c.CurrentContext = "vcluster"
	return c
}

// hookConfig parses a YAML plugin config into the map[string]any that vConfig.Plugins holds.
func hookConfig(tb testing.TB, y string) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		tb.Fatalf("plugin config: %v", err)
	}
	return m
}

// linkOrCopy hard-links src to dst, or copies it when the link fails (other file system).
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// synchookConfig is the hook config of the synchook plugin in these tests.
const synchookConfig = `
hooks:
  - name: pod-labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    labels:
      labels: {vcluster.example.com/tenant: team-a}
      annotations: {synchook.io/owner: platform}
  - name: strip-host-fields
    resources: [{apiVersion: v1, kind: Pod}]
    types: [GetPhysical]
    strip:
      paths: [/metadata/labels/host.example.com~1pool, /spec/nodeName]
  - name: service-labels
    resources: [{apiVersion: v1, kind: Service}]
    types: [CreatePhysical]
    labels: {labels: {vcluster.example.com/tenant: team-a}}
  - name: secret-labels
    resources: [{apiVersion: v1, kind: Secret}]
    types: [CreatePhysical]
    labels: {labels: {vcluster.example.com/synced: "true"}}
`

// synchookPlugin is the synchook binary in the plugin directory "synchook" with config y.
func synchookPlugin(tb testing.TB, y string) pluginSpec {
	tb.Helper()
	return pluginSpec{Dir: "synchook", Binary: binary(tb, binSynchook), Config: hookConfig(tb, y)}
}

// firstLine returns the first line of s, for short error messages.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
