package plugin

import (
	"bytes"
	"strings"
	"testing"
)

// The plan lines every case shares.
const (
	planDeadline  = "#   limit: the request's deadline bounds the whole run: an answer not ready by then is not given\n"
	planBuiltin   = "#   limit: builtin hooks: they run on the request's goroutine, without a deadline of their own\n"
	planReserved  = "#   undo: before: the reserved annotations (the undo, provenance) are taken off what the hooks see\n"
	planRecord    = "#   undo: after: the change's undo is recorded and sealed into the undo annotation (undo.RecordOps/RecordMaps, Rule.Seal)\n"
	planTypedWhy  = "#   why: a hook needs the whole object: one decode into the kind's Go type, the hooks in order, one compare\n"
	planLightBack = "#   fallback: while the chain's runs change only labels and annotations, the compare is of the two maps; a run that changes more compares the whole object\n"
)

// The policy example's plan is held by config/policy's TestMutateExplainOfThePolicyExample,
// which links the policy hooks (this package must not: TestPluginLinksNoPolicyEngine).
func TestMutateExplainPrintsEachDocumentsPlanBeforeItsPatch(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	strip := writeFile(t, "strip.yaml", `hooks:
  - name: strip-match-label-keys
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    strip:
      paths: ["/spec/topologySpreadConstraints/*/matchLabelKeys"]
`)
	image := writeFile(t, "image.yaml", `hooks:
  - name: mirror
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical, GetPhysical]
    image:
      rules:
        - {from: docker.io, to: registry.internal/dockerhub}
`)
	configMap := writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n")
	for _, tc := range []struct {
		name   string
		goHook bool
		args   []string
		plan   string
	}{
		{
			"the labels example runs on the labels and annotations alone",
			false,
			[]string{"-f", "../examples/pod.yaml"},
			"# CreatePhysical Pod: path metadata\n" +
				"#   why: every hook is a MetadataHook: they run on the labels and annotations alone, no decode\n" +
				"#   hooks: default-labels\n" + planReserved + planRecord + planDeadline + planBuiltin,
		},
		{
			"the strip example runs on the request's JSON and names its two fallbacks",
			false,
			[]string{"--config", strip, "-f", "../examples/pod.yaml"},
			"# CreatePhysical Pod: path document\n" +
				"#   why: every hook is a strip hook: their paths are removed from the request's JSON, no decode\n" +
				"#   hooks: strip-match-label-keys\n" + planReserved + planRecord +
				"#   fallback: a strip path meets a scalar where it goes on (the decode judges it): typed\n" +
				"#   fallback: the undo of a removal needs the whole hooked object (metadata.annotations removed whole): typed\n" +
				planDeadline + planBuiltin,
		},
		{
			"the image example decodes the object",
			false,
			[]string{"--config", image, "-f", "../examples/pod.yaml"},
			"# CreatePhysical Pod: path typed\n" + planTypedWhy + "#   hooks: mirror\n" + planReserved + planRecord + planLightBack + planDeadline + planBuiltin,
		},
		{
			"a typed Go hook decodes the object and runs on a goroutine of its own",
			true,
			[]string{"-f", "../examples/pod.yaml"},
			"# CreatePhysical Pod: path typed\n" + planTypedWhy + "#   hooks: go-label\n" + planReserved + planRecord + planLightBack + planDeadline,
		},
		{
			"a kind without hooks passes unchanged",
			false,
			[]string{"-f", configMap},
			"# CreatePhysical ConfigMap: path none\n" +
				"#   why: no hook is registered for this kind and hook type: the object passes unchanged\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			if tc.goHook {
				if err := p.Register(goLabel()); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			args := append([]string{"mutate", "--type", "CreatePhysical", "--explain"}, tc.args...)
			if code := p.run(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			out := stdout.String()
			plan, rest, ok := strings.Cut(strings.TrimPrefix(out, "# Plan\n"), "# JSON Patch (CreatePhysical")
			if !ok || !strings.HasPrefix(out, "# Plan\n") {
				t.Fatalf("output does not start with the plan and then the patch:\n%s", out)
			}
			if plan != tc.plan {
				t.Errorf("plan:\n%s\nwant:\n%s", plan, tc.plan)
			}
			if !strings.Contains(rest, "# Result\n") {
				t.Errorf("no result after the plan:\n%s", out)
			}
		})
	}
	t.Run("with -o it is a usage error, nothing printed", func(t *testing.T) {
		code, out, errOut := runCLI(t, "mutate", "--type", "CreatePhysical", "--explain", "-o", "json", "-f", "../examples/pod.yaml")
		if code != exitUsage || out != "" || !strings.Contains(errOut, "--explain prints for people: not with -o json") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}
