package plugin

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// celPackages are the module paths that policy hooks link (≈ 9 MB of the synchook binary). A
// hook author's binary built on package plugin must not pay for them unless it imports
// config/policy.
var celPackages = []string{"k8s.io/apiserver/", "github.com/google/cel-go/", "github.com/antlr4-go/antlr/", "cel.dev/expr"}

// deps returns the packages pkg imports, directly or not, as `go list -deps` lists them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", pkg)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}

// linked returns the packages of list under one of celPackages.
func linked(list []string) []string {
	var found []string
	for _, p := range list {
		for _, prefix := range celPackages {
			if strings.HasPrefix(p, prefix) || p == strings.TrimSuffix(prefix, "/") {
				found = append(found, p)
				break
			}
		}
	}
	return found
}

func TestPluginLinksNoPolicyEngine(t *testing.T) {
	if found := linked(deps(t, "github.com/synchook/synchook/plugin")); len(found) > 0 {
		t.Errorf("package plugin links %d packages of policy hooks (only config/policy may): %s", len(found), strings.Join(found, " "))
	}
	// The check finds them where they are: the synchook binary links them through config/policy.
	if found := linked(deps(t, "github.com/synchook/synchook")); len(found) == 0 {
		t.Errorf("the synchook binary links none of %v: policy hooks are missing from it, or the check is wrong", celPackages)
	}
}

func TestPolicyHookWithoutConfigPolicyExitsTwoNamingThePackage(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(cfg, []byte("hooks:\n  - types: [CreatePhysical]\n    policyFile: ../examples/policies/label-from-variable.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "mutate", "--type", "CreatePhysical", "-f", "../examples/pod.yaml", "--config", cfg)
	want := "hooks[0].policyFile: Forbidden: policy hooks are not linked into this binary: import github.com/synchook/synchook/config/policy (the synchook binary has them)"
	if code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, want)
	}
}
