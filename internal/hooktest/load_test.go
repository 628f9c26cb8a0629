package hooktest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/hooktest"
)

// teamPolicy is a MutatingAdmissionPolicy that labels Pods team: a.
const teamPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"team": "a"}}}'
`

// synchook test loads a config as serve and the plugins load it (config.Load): a relative
// policyFile of a config file is relative to that file, from any working directory; one in a
// values file's plugins.synchook.config (PLUGIN_CONFIG under vcluster) or in the test file's
// inline config has no directory and is refused, as the plugin v2 would refuse it.
func TestTestLoadsTheConfigAsTheServerDoes(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cases := "cases:\n  - {name: a, object: pod.yaml, expect: {match: subset, object: {metadata: {labels: {team: a}}}}}\n"
	for _, tt := range []struct {
		name, cwd, arg string
		files          map[string]string
		want           []string // stderr parts of an ExitInvalid; none: passes
	}{
		{name: "examples/policies passes from the repo root", cwd: root, arg: "examples/policies"},
		{name: "examples/policies passes from its own directory", cwd: filepath.Join(root, "examples", "policies"), arg: "."},
		{
			name: "a relative policyFile in a values file's plugins.synchook.config is refused as PLUGIN_CONFIG",
			files: map[string]string{
				"values.yaml": "plugins:\n  synchook:\n    config:\n      hooks:\n        - {name: team, types: [CreatePhysical], policyFile: policy.yaml}\n",
				"policy.yaml": teamPolicy, "pod.yaml": pod, hooktest.FileName: "values: values.yaml\n" + cases,
			},
			want: []string{`values: config env PLUGIN_CONFIG: invalid synchook config: hooks[0].policyFile: Invalid value: "policy.yaml" is relative, and this config was given inline in PLUGIN_CONFIG, which has no directory: give an absolute path`},
		},
		{
			name: "a relative policyFile in the test file's inline config is refused",
			files: map[string]string{
				"policy.yaml": teamPolicy, "pod.yaml": pod,
				hooktest.FileName: "config: {hooks: [{name: team, types: [CreatePhysical], policyFile: policy.yaml}]}\n" + cases,
			},
			want: []string{`config: invalid synchook config: hooks[0].policyFile: Invalid value: "policy.yaml" is relative, and this config was given inline, which has no directory: give an absolute path`},
		},
		{
			name: "a relative policyFile in a config file beside the test passes",
			files: map[string]string{
				"config.yaml": "hooks:\n  - {name: team, types: [CreatePhysical, UpdatePhysical], policyFile: policy.yaml}\n",
				"policy.yaml": teamPolicy, "pod.yaml": pod, hooktest.FileName: "config: config.yaml\n" + cases,
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			arg := tt.arg
			if tt.files != nil {
				arg = dir(t, tt.files)
			}
			if tt.cwd != "" {
				t.Chdir(tt.cwd)
			} else {
				t.Chdir(t.TempDir()) // the working directory holds none of the files
			}
			code, out, errOut := run(t, arg, hooktest.Options{}, false)
			if len(tt.want) == 0 {
				if code != hooktest.ExitOK {
					t.Fatalf("exit %d\n%s%s", code, out, errOut)
				}
				return
			}
			if code != hooktest.ExitInvalid {
				t.Errorf("exit %d, want %d\n%s%s", code, hooktest.ExitInvalid, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut+out, w) {
					t.Errorf("output lacks %q:\n%s%s", w, out, errOut)
				}
			}
		})
	}
}
