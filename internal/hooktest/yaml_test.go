package hooktest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/hooktest"
)

// A failure shows expected and got as YAML, in a unified diff with context lines (the diff
// synchook replay prints), in the text output and in JUnit's; never Go syntax.
func TestAFailingCaseShowsAUnifiedYAMLDiff(t *testing.T) {
	noUndo := strings.Replace(labelsConfig, "labels: {labels: {team: a}}", "labels: {labels: {team: a}}\n    undo: false", 1)
	for _, tt := range []struct {
		name, config, test string
		want               []string
	}{
		{
			name: "an exact expectation that differs shows expected and got with context", config: labelsConfig,
			test: "config: config.yaml\ncases:\n  - name: the label\n    object: pod.yaml\n    expect:\n      object:\n" +
				"        apiVersion: v1\n        kind: Pod\n        metadata: {name: web, namespace: ns, labels: {app: web, team: b}}\n" +
				"        spec: {containers: [{name: web, image: nginx}]}\n",
			want: []string{
				"the result is not the expected object (-expected +got)",
				"--- expected", "+++ got", "@@ ",
				"     app: web", // a context line
				"-    team: b", "+    team: a",
			},
		},
		{
			name: "a subset expectation that differs shows the fields it names", config: labelsConfig,
			test: "config: config.yaml\ncases:\n  - name: the label\n    object: pod.yaml\n    expect:\n      match: subset\n      object: {metadata: {labels: {app: web, team: b}}}\n",
			want: []string{"the result does not contain the expected fields (-expected +got)", "--- expected", "+++ got", "     app: web", "-    team: b", "+    team: a"},
		},
		{
			name: "a round trip that leaves a trace shows what was sent and what was read", config: noUndo,
			test: "config: config.yaml\ncases:\n  - name: the label\n    object: pod.yaml\n",
			want: []string{"does not give the syncer back what it sent", "--- sent", "+++ read", "     app: web", "+    team: a"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := dir(t, map[string]string{"config.yaml": tt.config, "pod.yaml": pod, hooktest.FileName: tt.test})
			for _, junit := range []bool{false, true} {
				code, out, errOut := run(t, d, hooktest.Options{}, junit)
				if code != hooktest.ExitFailed {
					t.Errorf("junit %v: exit %d, want %d\n%s%s", junit, code, hooktest.ExitFailed, out, errOut)
				}
				for _, w := range tt.want {
					if !strings.Contains(out, w) {
						t.Errorf("junit %v: output lacks %q:\n%s", junit, w, out)
					}
				}
				for _, goSyntax := range []string{"map[string]any", "string(", "strings.Join", "[]any{"} {
					if strings.Contains(out, goSyntax) {
						t.Errorf("junit %v: output shows Go syntax %q:\n%s", junit, goSyntax, out)
					}
				}
			}
		})
	}
}

// A misspelt or unknown key of a test file names where it is and the keys valid there, at
// every level, as config errors do.
func TestAnUnknownKeyNamesItsPathAndTheValidKeys(t *testing.T) {
	for _, tt := range []struct{ name, file, want string }{
		{
			name: "a misspelt top-level key",
			file: "confg: config.yaml\ncases:\n  - {name: a, object: pod.yaml}\n",
			want: `: unknown field "confg" (valid: bindings, cases, config, configError, name, namespaces, params, requireHooks, transport, values, virtualNamespaces)`,
		},
		{
			name: "objct in the first case",
			file: "config: config.yaml\ncases:\n  - name: a\n    objct: pod.yaml\n",
			want: `: cases[0]: unknown field "objct" (valid: expect, name, object, oldObject, type)`,
		},
		{
			name: "a misspelt key in the second case's expect",
			file: "config: config.yaml\ncases:\n  - {name: a, object: pod.yaml}\n  - name: b\n    object: pod.yaml\n    expect: {mach: subset}\n",
			want: `: cases[1].expect: unknown field "mach" (valid: error, match, noRoundTrip, object, readKeeps)`,
		},
		{
			name: "a misspelt key in a namespace's metadata",
			file: "config: config.yaml\nnamespaces:\n  - metadata: {name: ns, lables: {team: a}}\ncases:\n  - {name: a, object: pod.yaml}\n",
			want: `: namespaces[0].metadata: unknown field "lables" (valid: annotations, `,
		},
		{
			name: "a list where a string belongs",
			file: "config: config.yaml\ncases:\n  - {name: a, object: pod.yaml}\n  - {name: [b], object: pod.yaml}\n",
			want: `: cases[1].name: a list, want a string`,
		},
		{
			name: "a mapping where the list of cases belongs",
			file: "config: config.yaml\ncases: {name: a}\n",
			want: `: cases: a mapping, want a list`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := dir(t, map[string]string{"config.yaml": labelsConfig, "pod.yaml": pod, hooktest.FileName: tt.file})
			code, out, errOut := run(t, d, hooktest.Options{}, false)
			if code != hooktest.ExitInvalid || !strings.Contains(errOut, hooktest.FileName+tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q\n%s", code, errOut, hooktest.ExitInvalid, hooktest.FileName+tt.want, out)
			}
		})
	}
}

// Scalars of a string field stay as written, as sigs.k8s.io/yaml's Unmarshal makes them: a
// case named 1, a label value yes.
func TestScalarsOfStringFieldsAreStrings(t *testing.T) {
	test := "config: config.yaml\nnamespaces:\n  - metadata: {name: ns, labels: {enabled: yes, n: 1}}\ncases:\n  - name: 1\n    object: pod.yaml\n"
	d := dir(t, map[string]string{"config.yaml": labelsConfig, "pod.yaml": pod, hooktest.FileName: test})
	if code, out, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK || !strings.Contains(out, "--- PASS: ") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// values: takes the config from vcluster values in either layout synchook ships: plugin.yaml's
// plugins.synchook.config (plugin v2) and plugin-v1.yaml's legacy sidecar, whose config is the
// env var SYNCHOOK_CONFIG of plugin.synchook; anything else is refused saying what was looked
// for and why it is not there.
func TestValuesTakesEitherPluginLayoutOrSaysWhyNot(t *testing.T) {
	v1, err := os.ReadFile("../../plugin-v1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := os.ReadFile("../../plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := "cases:\n  - {name: a, object: pod.yaml, expect: {match: subset, object: {metadata: {labels: {synchook.io/hooked: \"true\"}}}}}\n"
	for _, tt := range []struct {
		name, values string
		want         []string // stderr parts of an ExitInvalid; none: passes
	}{
		{name: "plugin-v1.yaml's SYNCHOOK_CONFIG is the config", values: string(v1)},
		{name: "plugin.yaml's plugins.synchook.config is the config", values: string(v2)},
		{
			name:   "a values file with neither layout names both keys it looked for",
			values: "plugins:\n  other: {config: {}}\n",
			want: []string{
				`values: values.yaml: no synchook config: no plugins.synchook.config (vcluster plugin v2, as in plugin.yaml) and no plugin.synchook (the legacy plugin v1 sidecar, as in plugin-v1.yaml, with its config in the env var SYNCHOOK_CONFIG); plugins has: other`,
			},
		},
		{
			name:   "a v1 sidecar without SYNCHOOK_CONFIG says the env var is missing",
			values: "plugin:\n  synchook:\n    image: x\n    env: [{name: OTHER, value: x}]\n",
			want:   []string{`values: values.yaml: plugin.synchook.env has no SYNCHOOK_CONFIG with a value (the legacy plugin v1 sidecar's config; without it the sidecar runs the built-in default); env has: OTHER`},
		},
		{
			name:   "a v1 SYNCHOOK_CONFIG from a ConfigMap cannot be read offline",
			values: "plugin:\n  synchook:\n    env: [{name: SYNCHOOK_CONFIG, valueFrom: {configMapKeyRef: {name: c, key: k}}}]\n",
			want:   []string{`values: values.yaml: plugin.synchook.env SYNCHOOK_CONFIG comes from valueFrom, which synchook test cannot read`},
		},
		{
			name:   "a v1 sidecar whose args name a config file cannot be read offline",
			values: "plugin:\n  synchook:\n    args: [serve, --config=/etc/synchook/config.yaml]\n",
			want:   []string{`values: values.yaml: plugin.synchook.args give --config=/etc/synchook/config.yaml, a file in the pod that synchook test cannot read`},
		},
		{
			name:   "both layouts at once are refused",
			values: "plugins:\n  synchook: {config: {hooks: []}}\nplugin:\n  synchook:\n    env: [{name: SYNCHOOK_CONFIG, value: 'hooks: []'}]\n",
			want:   []string{`values: values.yaml: both plugins.synchook (plugin v2) and plugin.synchook (plugin v1): keep one`},
		},
		{
			name:   "a v1 config's errors name the env var",
			values: "plugin:\n  synchook:\n    env: [{name: SYNCHOOK_CONFIG, value: 'hooks: [{lables: {}}]'}]\n",
			want:   []string{`values: config env SYNCHOOK_CONFIG: invalid synchook config: hooks[0]: unknown field "lables"`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := dir(t, map[string]string{"values.yaml": tt.values, "pod.yaml": pod, hooktest.FileName: "values: values.yaml\n" + cases})
			code, out, errOut := run(t, d, hooktest.Options{}, false)
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
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}
