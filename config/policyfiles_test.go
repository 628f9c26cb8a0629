package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
)

// filesPolicy labels a pod tier=params.data.tier for each param its bindings select.
const filesPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: tier}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: "[JSONPatch{op: 'add', path: '/metadata/labels', value: {'tier': params.data.tier}}]"
`

const filesBindings = `# the bindings of the tier policy
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: tier}
spec:
  policyName: tier
  paramRef: {namespace: platform, selector: {matchLabels: {role: tier}}}
`

const filesParams = `apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated, namespace: platform}
data: {tier: bronze}
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: gold, namespace: platform, labels: {role: tier}}
    data: {tier: gold}
`

const filesConfig = `hooks:
  - name: tier
    types: [CreatePhysical]
    policyFile: policy.yaml
    bindingsFile: bindings.yaml
    paramsFile: params.yaml
`

// writeFiles writes files (name → content) into a new temporary directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBindingsFileAndParamsFile: a policy entry's bindingsFile and paramsFile, relative to the
// config file's directory as policyFile is, give its bindings and params, every document of
// each (and every item of a v1 List); a bad one is named by its key, file and document.
func TestBindingsFileAndParamsFile(t *testing.T) {
	files := map[string]string{"config.yaml": filesConfig, "policy.yaml": filesPolicy, "bindings.yaml": filesBindings, "params.yaml": filesParams}
	t.Run("the files beside the config give the bindings and params", func(t *testing.T) {
		dir := writeFiles(t, files)
		cfg, _, err := config.Load(filepath.Join(dir, "config.yaml"), nil)
		if err != nil {
			t.Fatal(err)
		}
		reg := engine.NewRegistry(nil)
		if err := cfg.Build(reg); err != nil {
			t.Fatal(err)
		}
		res, err := reg.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Pod"), hooks.CreatePhysical,
			[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a"},"spec":{"containers":[{"name":"c","image":"i"}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res.Patch), `"tier":"gold"`) {
			t.Errorf("patch %s, want the label tier=gold from the List's ConfigMap", res.Patch)
		}
	})
	for _, tc := range []struct {
		name    string
		replace map[string][2]string // file → old, new
		inline  bool                 // Parse config.yaml's text (no directory) instead of Load
		want    string
	}{
		{
			name: "a param without a name is named by file and document", replace: map[string][2]string{"params.yaml": {"name: unrelated, ", ""}},
			want: "paramsFile params.yaml: document 1 (params[0]): invalid MutatingAdmissionPolicy: metadata.name: Required value",
		},
		{
			name: "a bad item of a List is named by its document and item", replace: map[string][2]string{"params.yaml": {"name: gold, ", ""}},
			want: "paramsFile params.yaml: document 2 items[0] (params[1])",
		},
		{
			name: "an unknown field of a binding is named by file and document", replace: map[string][2]string{"bindings.yaml": {"policyName: tier", "policyNam: tier"}},
			want: `bindingsFile bindings.yaml: document 2 (bindings[0]): invalid MutatingAdmissionPolicy: unknown field "spec.policyNam"`,
		},
		{
			name: "a document that is not YAML is named", replace: map[string][2]string{"params.yaml": {"kind: List", "kind: [List"}},
			want: "hooks[0].paramsFile: Invalid value: params.yaml: document 2: ",
		},
		{
			name: "a binding naming another policy is named", replace: map[string][2]string{"bindings.yaml": {"policyName: tier", "policyName: other"}},
			want: `bindings[0].spec.policyName: Invalid value: "other": names no configured policy`,
		},
		{
			name: "a missing file is named at its key", replace: map[string][2]string{"config.yaml": {"paramsFile: params.yaml", "paramsFile: nope.yaml"}},
			want: "hooks[0].paramsFile: Invalid value: ",
		},
		{
			name: "bindings and bindingsFile together are refused", replace: map[string][2]string{"config.yaml": {"    bindingsFile:", "    bindings: []\n    bindingsFile:"}},
			want: "hooks[0].bindingsFile: Forbidden: bindings and bindingsFile cannot both be set",
		},
		{
			name: "a relative file in an inline config is refused naming the key", inline: true,
			want: `hooks[0].bindingsFile: Invalid value: "bindings.yaml" is relative, and this config was given inline`,
		},
		{
			name: "the files on an entry without a policy are refused", replace: map[string][2]string{"config.yaml": {"policyFile: policy.yaml", "labels: {labels: {a: b}}\n    resources: [{apiVersion: v1, kind: Pod}]"}},
			want: "hooks[0]: Forbidden: bindings, params, bindingsFile and paramsFile are only for a policy or policyFile entry",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := map[string]string{}
			for name, content := range files {
				if r, ok := tc.replace[name]; ok {
					if !strings.Contains(content, r[0]) {
						t.Fatalf("%s has no %q", name, r[0])
					}
					content = strings.Replace(content, r[0], r[1], 1)
				}
				fs[name] = content
			}
			dir := writeFiles(t, fs)
			var cfg *config.Config
			var err error
			if tc.inline {
				// An inline config has no directory: its policyFile is absolute, its bindingsFile not.
				cfg, err = config.Parse([]byte(strings.Replace(fs["config.yaml"], "policyFile: policy.yaml", "policyFile: "+filepath.Join(dir, "policy.yaml"), 1)))
			} else {
				cfg, _, err = config.Load(filepath.Join(dir, "config.yaml"), nil)
			}
			if err == nil {
				err = cfg.Build(engine.NewRegistry(nil))
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrInvalid naming %s", err, tc.want)
			}
		})
	}
}
