package policy_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synchook/synchook/plugin"
)

// `synchook mutate --explain` on the policy example prints its plan: the policies in order on
// the decoded object (plugin's TestMutateExplainPrintsEachDocumentsPlanBeforeItsPatch holds
// the other examples' plans; this package links the policy hooks).
func TestMutateExplainOfThePolicyExample(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	p := &plugin.Plugin{
		Args: []string{
			"mutate", "--explain", "--type", "CreatePhysical",
			"--config", filepath.Join(root, "examples", "policies", "config.yaml"), "-f", filepath.Join(root, "examples", "pod.yaml"),
		},
		Stdin:  strings.NewReader(""),
		Stdout: &out, Stderr: &errOut,
		Getenv: func(string) string { return "" },
	}
	if err := p.Start(); err != nil {
		t.Fatalf("mutate: %v\n%s", err, errOut.String())
	}
	want := "# Plan\n" +
		"# CreatePhysical Pod: path typed\n" +
		"#   why: a hook needs the whole object: one decode into the kind's Go type, the hooks in order, one compare\n" +
		"#   hooks: tolerations-add, toleration-remove, priorityclassname-remove, label-from-variable, nodeselector-merge, sidecar-initcontainer, env-merge\n" +
		"#   undo: before: the reserved annotations (the undo, provenance) are taken off what the hooks see\n" +
		"#   undo: after: the change's undo is recorded and sealed into the undo annotation (undo.RecordOps/RecordMaps, Rule.Seal)\n" +
		"#   fallback: while the chain's runs change only labels and annotations, the compare is of the two maps; a run that changes more compares the whole object\n" +
		"#   limit: the request's deadline bounds the whole run: an answer not ready by then is not given\n" +
		"# JSON Patch (CreatePhysical, hooks run: 7)\n"
	if !strings.HasPrefix(out.String(), want) {
		t.Errorf("output does not start with the plan:\n%s\nwant:\n%s", out.String(), want)
	}
}
