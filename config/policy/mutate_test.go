package policy_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synchook/synchook/plugin"
)

// `synchook mutate --config examples/policies/config.yaml` runs the example policies from any
// working directory (their policyFile entries are relative to config.yaml), as synchook test
// does; the test links the policy hooks as the synchook binary does (this package).
func TestMutateWithTheExamplePoliciesFromAnyDirectory(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pod := filepath.Join(root, "examples", "pod.yaml")
	for _, tt := range []struct{ name, cwd, config string }{
		{"from the repo root", root, "examples/policies/config.yaml"},
		{"from examples/policies", filepath.Join(root, "examples", "policies"), "config.yaml"},
		{"from another directory", t.TempDir(), filepath.Join(root, "examples", "policies", "config.yaml")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(tt.cwd)
			var out, errOut bytes.Buffer
			p := &plugin.Plugin{
				Args:   []string{"mutate", "--config", tt.config, "--type", "CreatePhysical", "-f", pod},
				Stdin:  strings.NewReader(""),
				Stdout: &out, Stderr: &errOut,
				Getenv: func(string) string { return "" },
			}
			if err := p.Start(); err != nil {
				t.Fatalf("mutate: %v\n%s", err, errOut.String())
			}
			// label-from-variable: the part of the namespace before the first "-".
			if want := "synchook.io/team: vcluster"; !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		})
	}
}
