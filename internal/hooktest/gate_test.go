package hooktest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synchook/synchook/config"
	_ "github.com/synchook/synchook/config/policy" // policy hooks, as the synchook binary links them
	"github.com/synchook/synchook/internal/hooktest"
	"github.com/synchook/synchook/internal/sidecar"
)

// appendConfig is a policy whose every run appends one more container: not idempotent, so the
// server refuses to start with it (its load-time self-test runs each chain twice).
const appendConfig = `
hooks:
  - name: append
    types: [CreatePhysical, UpdatePhysical]
    policy:
      apiVersion: admissionregistration.k8s.io/v1
      kind: MutatingAdmissionPolicy
      metadata: {name: append}
      spec:
        reinvocationPolicy: Never
        matchConstraints:
          resourceRules:
            - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
        mutations:
          - patchType: JSONPatch
            jsonPatch:
              expression: >-
                [JSONPatch{op: "add", path: "/spec/containers/-", value: Object.spec.containers{name: "sidecar", image: "busybox"}}]
`

// The server's refusal of a config, as serve and the vcluster plugins print it.
func serverRefusal(t *testing.T, cfgYAML string) error {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sidecar.RegistryOf(context.Background(), cfg, sidecar.RegistryConfig{})
	if !errors.Is(err, sidecar.ErrConfig) {
		t.Fatalf("the server would start with the config: %v", err)
	}
	return err
}

// A config that would not start fails its test file with exit 2 and the server's message; a
// file that expects the refusal (configError) passes (issue 44).
func TestAConfigTheServerWouldRefuseFailsItsTestFile(t *testing.T) {
	refusal := serverRefusal(t, appendConfig)
	test := "config: config.yaml\ncases:\n  - name: the sidecar\n    object: pod.yaml\n    expect: {match: subset, object: {metadata: {name: web}}}\n"
	d := dir(t, map[string]string{"config.yaml": appendConfig, "pod.yaml": pod, hooktest.FileName: test})
	code, out, errOut := run(t, d, hooktest.Options{}, false)
	if code != hooktest.ExitInvalid || !strings.Contains(errOut, refusal.Error()) {
		t.Errorf("exit %d, stderr %q; want %d with the server's %q", code, errOut, hooktest.ExitInvalid, refusal)
	}
	if !strings.Contains(out, "FAIL\t1 file refused, 0 of 0 cases failed in 1 files") || !strings.Contains(out, "--- REFUSED: ") {
		t.Errorf("summary:\n%s", out)
	}
	d = dir(t, map[string]string{"config.yaml": appendConfig, hooktest.FileName: "config: config.yaml\nconfigError: not idempotent\n"})
	if code, out, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("configError file: exit %d\n%s%s", code, out, errOut)
	}
}

// The summary and the JUnit report count a refused file apart from failed cases.
func TestARefusedFileIsCountedAndIsAJUnitError(t *testing.T) {
	good := "config: ../config.yaml\ncases:\n  - {name: one, object: ../pod.yaml}\n  - {name: two, object: ../pod.yaml}\n"
	d := dir(t, map[string]string{"config.yaml": labelsConfig, "pod.yaml": pod, "append.yaml": appendConfig})
	for sub, content := range map[string]string{"a": good, "b": "config: ../append.yaml\ncases:\n  - {name: x, object: ../pod.yaml}\n", "c": "config: ../config.yaml\ncases: [{name: y, object: ../pod.yaml, typo: 1}]\n"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, sub, hooktest.FileName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := run(t, d, hooktest.Options{}, false)
	if code != hooktest.ExitInvalid || !strings.Contains(out, "FAIL\t2 files refused, 0 of 2 cases failed in 3 files") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, d, hooktest.Options{}, true)
	if code != hooktest.ExitInvalid || strings.Count(out, `errors="1"`) != 2 || strings.Count(out, "<error message=") != 2 || !strings.Contains(out, "not idempotent") {
		t.Errorf("JUnit, exit %d:\n%s", code, out)
	}
}

// config: may hold the hooks inline.
func TestAnInlineConfig(t *testing.T) {
	inline := strings.ReplaceAll(strings.TrimPrefix(labelsConfig, "\n"), "\n", "\n  ")
	test := "config:\n  " + inline + "\ncases:\n  - name: the label\n    object: pod.yaml\n    expect: {match: subset, object: {metadata: {labels: {team: a}}}}\n"
	d := dir(t, map[string]string{"pod.yaml": pod, hooktest.FileName: test})
	if code, out, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("exit %d\n%s%s\n%s", code, out, errOut, test)
	}
	d = dir(t, map[string]string{"pod.yaml": pod, hooktest.FileName: "config: [a]\ncases: [{name: x, object: pod.yaml}]\n"})
	if code, _, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitInvalid || !strings.Contains(errOut, "config: a file name or the config inline") {
		t.Errorf("a list as config: exit %d, %s", code, errOut)
	}
}

// A round trip that fails because a hook runs on Create only says so and names the fix.
func TestACreateOnlyHookIsNamedInTheRoundTripFailure(t *testing.T) {
	// a spec change (a metadata change a read always takes off)
	mirror := "hooks:\n  - name: mirror\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    image: {rules: [{from: docker.io, to: registry.internal/dockerhub}]}\n"
	d := dir(t, map[string]string{"config.yaml": mirror, "pod.yaml": pod, hooktest.FileName: "config: config.yaml\ncases:\n  - {name: the image, object: pod.yaml}\n"})
	code, out, _ := run(t, d, hooktest.Options{}, false)
	for _, want := range []string{"mirror run on CreatePhysical but not on UpdatePhysical", "list UpdatePhysical in their types too", "docs/day2.md#what-each-operation-does"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != hooktest.ExitFailed {
		t.Errorf("exit %d, want %d", code, hooktest.ExitFailed)
	}
	// with the Update type listed, the same case passes
	d = dir(t, map[string]string{"config.yaml": strings.Replace(mirror, "[CreatePhysical]", "[CreatePhysical, UpdatePhysical]", 1), "pod.yaml": pod, hooktest.FileName: "config: config.yaml\ncases:\n  - {name: the image, object: pod.yaml}\n"})
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// A Create's object copied from `kubectl get` carries its old creationTimestamp; the host
// replaces it, so the round trip reads the time the host gives and passes (a Create's seal
// opens only on an object created within undo.NameBindWindow of it).
func TestACreateOfAnObjectWithAnOldCreationTimestampRoundTrips(t *testing.T) {
	strip := "hooks:\n  - name: strip\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical, UpdatePhysical]\n    strip: {paths: [/spec/schedulerName]}\n"
	old := "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ns, creationTimestamp: \"2024-01-01T00:00:00Z\"}\nspec: {schedulerName: custom, containers: [{name: web, image: nginx}]}\n"
	d := dir(t, map[string]string{"config.yaml": strip, "pod.yaml": old, hooktest.FileName: "config: config.yaml\ncases:\n  - {name: copied, object: pod.yaml}\n"})
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// oldConfig labels a Pod on UPDATE with the app label its stored version had (CEL oldObject),
// "none" where there is no stored version (vcluster sends none).
const oldConfig = `
hooks:
  - name: was
    types: [UpdatePhysical, DeletePhysical]
    policy:
      apiVersion: admissionregistration.k8s.io/v1
      kind: MutatingAdmissionPolicy
      metadata: {name: was}
      spec:
        reinvocationPolicy: Never
        matchConstraints:
          resourceRules:
            - {apiGroups: [""], apiVersions: [v1], operations: [UPDATE, DELETE], resources: [pods]}
        mutations:
          - patchType: ApplyConfiguration
            applyConfiguration:
              expression: >-
                Object{metadata: Object.metadata{labels: {"was": oldObject == null ? "none" : oldObject.metadata.labels["app"]}}}
`

// A case gives the request as production sends it: oldObject on an admission UPDATE, none
// under vcluster (refused there, naming why), and Delete cases.
func TestTheRequestAsProductionSendsIt(t *testing.T) {
	old := strings.Replace(pod, "labels: {app: web}", "labels: {app: old-web}", 1)
	admission := `config: config.yaml
transport: admission
cases:
  - name: an UPDATE with the stored object
    type: UpdatePhysical
    object: pod.yaml
    oldObject: old.yaml
    expect: {match: subset, object: {metadata: {labels: {was: old-web}}}, noRoundTrip: true}
  - name: an UPDATE without one
    type: UpdatePhysical
    object: pod.yaml
    expect: {match: subset, object: {metadata: {labels: {was: none}}}, noRoundTrip: true}
  - name: a DELETE, whose object is the stored one
    type: DeletePhysical
    object: pod.yaml
    expect: {match: subset, object: {metadata: {labels: {was: web}}}}
`
	d := dir(t, map[string]string{"config.yaml": oldConfig, "pod.yaml": pod, "old.yaml": old, hooktest.FileName: admission})
	if code, out, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("admission: exit %d\n%s%s", code, out, errOut)
	}
	vcluster := strings.Replace(admission, "transport: admission\n", "", 1)
	d = dir(t, map[string]string{"config.yaml": oldConfig, "pod.yaml": pod, "old.yaml": old, hooktest.FileName: vcluster})
	if code, _, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitInvalid || !strings.Contains(errOut, "cases[0].oldObject: vcluster sends no old object") {
		t.Errorf("vcluster config with oldObject: exit %d, %s", code, errOut)
	}
	onCreate := strings.Replace(admission, "    type: UpdatePhysical\n    object: pod.yaml\n    oldObject", "    type: CreatePhysical\n    object: pod.yaml\n    oldObject", 1)
	d = dir(t, map[string]string{"config.yaml": oldConfig, "pod.yaml": pod, "old.yaml": old, hooktest.FileName: onCreate})
	if code, _, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitInvalid || !strings.Contains(errOut, "on an Update type only") {
		t.Errorf("oldObject on a Create: exit %d, %s", code, errOut)
	}
}
