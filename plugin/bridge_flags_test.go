package plugin

import (
	"strings"
	"testing"
)

func TestPluginFlagsDefaultToTheChartsEnv(t *testing.T) {
	cases := []struct {
		name                string
		address, pluginName string
		wantAddr, wantName  string
	}{
		{"the chart's env turns the bridge on with its plugin name", "localhost:14001", "my-hooks", "localhost:14001", "my-hooks"},
		{"no env leaves the bridge off and the name synchook", "", "", "", "synchook"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Read through the Plugin's Getenv, not the process's environment.
			env := map[string]string{"VCLUSTER_PLUGIN_ADDRESS": tc.address, "VCLUSTER_PLUGIN_NAME": tc.pluginName}
			t.Setenv("VCLUSTER_PLUGIN_ADDRESS", "localhost:1")
			t.Setenv("VCLUSTER_PLUGIN_NAME", "from-the-process")
			fs, opts, _ := serveFlags(func(k string) string { return env[k] })
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			if opts.Bridge.Address != tc.wantAddr || opts.Bridge.Name != tc.wantName || opts.Bridge.VClusterAddress != "localhost:10099" {
				t.Errorf("bridge options %+v, want address %q name %q vcluster localhost:10099", opts.Bridge, tc.wantAddr, tc.wantName)
			}
		})
	}
}

func TestAMalformedPluginAddressExitsTwo(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	code, _, errOut := runCLI(t, "serve", "--plugin-address", "localhost", "--health-probe-bind-address", "0", "--cert-dir", t.TempDir())
	if code != 2 || !strings.Contains(errOut, `plugin address "localhost"`) {
		t.Errorf("exit %d, stderr %q; want 2 naming the plugin address", code, errOut)
	}
}
