package plugin

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// teamA is a config that labels pods team: a on CreatePhysical.
const teamA = `hooks:
  - name: labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels: {labels: {team: a}}
`

// listOf returns a v1 List (kubectl get -o yaml's shape) of the YAML objects items.
func listOf(items ...string) string {
	out := "apiVersion: v1\nkind: List\nitems:\n"
	for _, item := range items {
		out += "- " + strings.TrimSpace(strings.ReplaceAll(item, "\n", "\n  ")) + "\n"
	}
	return out + "metadata: {resourceVersion: \"\"}\n"
}

// podList is a PodList as the API server sends it: JSON, items without apiVersion and kind, the
// first with a number beyond float64's exact integers, which must come back as it went in.
const podList = `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[` +
	`{"metadata":{"name":"a","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"nginx"}],"activeDeadlineSeconds":12345678901234567}},` +
	`{"metadata":{"name":"b","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}]}`

func TestMutateRunsEachItemOfAList(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	config := writeFile(t, "config.yaml", teamA)
	const patch = "# JSON Patch (CreatePhysical, hooks run: 1)\n" + `[{"op":"add","path":"/metadata/labels","value":{"team":"a"}}`
	for _, tc := range []struct {
		name     string
		input    string
		args     []string
		wantCode int
		wantOut  []string // on stdout, in this order; none: stdout must be empty
		notOut   string   // must not be on stdout
		wantErr  string   // on stderr, $IN the input file's name
	}{
		{
			name:    "a v1 List of two Pods runs the hooks on each and prints two patches, each under the item's header",
			input:   listOf(pod("ns", "a"), pod("ns", "b")),
			wantOut: []string{"# document 1, item 1 (v1/Pod ns/a)\n" + patch, "# Result\n", "team: a", "name: a", "\n---\n# document 1, item 2 (v1/Pod ns/b)\n" + patch, "# Result\n", "team: a", "name: b"},
			notOut:  "kind: List",
		},
		{
			name:    "-o yaml of a List prints the items' results as YAML documents",
			input:   listOf(pod("ns", "a"), pod("ns", "b")),
			args:    []string{"-o", "yaml"},
			wantOut: []string{"apiVersion: v1\nkind: Pod\n", "  labels:\n    team: a\n  name: a\n", "\n---\napiVersion: v1\nkind: Pod\n", "  labels:\n    team: a\n  name: b\n"},
			notOut:  "List",
		},
		{
			name:  "a PodList in JSON, as the API sends it, runs each item as a Pod, its numbers exact, one object a line with -o json",
			input: podList,
			args:  []string{"-o", "json"},
			wantOut: []string{
				`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns","labels":{"team":"a"}`, `"activeDeadlineSeconds":12345678901234567}`, "}\n",
				`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b","namespace":"ns","labels":{"team":"a"}`, "}\n",
			},
			notOut: "PodList",
		},
		{
			name:    "a List mixed with a plain document runs all in the file's order",
			input:   pod("ns", "first") + "---\n" + listOf(pod("ns", "a"), pod("ns", "b")) + "---\n" + pod("ns", "last"),
			wantOut: []string{"# document 1 of 3: v1/Pod ns/first\n" + patch, "# document 2, item 1 (v1/Pod ns/a)\n" + patch, "# document 2, item 2 (v1/Pod ns/b)\n" + patch, "# document 3 of 3: v1/Pod ns/last\n" + patch, "name: last"},
		},
		{
			name:    "--explain prints each item's plan before its patch",
			input:   listOf(pod("ns", "a"), pod("ns", "b")),
			args:    []string{"--explain"},
			wantOut: []string{"# document 1, item 1 (v1/Pod ns/a)\n# Plan\n# CreatePhysical Pod: path metadata\n", patch, "# document 1, item 2 (v1/Pod ns/b)\n# Plan\n# CreatePhysical Pod: path metadata\n", patch},
		},
		{
			name:    "an empty List prints nothing for it and says so on stderr",
			input:   "apiVersion: v1\nkind: List\nitems: []\n---\n" + pod("ns", "a"),
			wantOut: []string{"# JSON Patch (CreatePhysical, hooks run: 1)\n", "name: a"},
			wantErr: "$IN: document 1: an empty List\n",
		},
		{
			name:    "a file of only an empty List, as kubectl get prints for no pods, prints nothing and exits 0",
			input:   "apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: \"\"\n",
			wantErr: "$IN: document 1: an empty List\n",
		},
		{
			name:     "a List with an invalid item exits 2 naming the item and prints nothing",
			input:    listOf(pod("ns", "a"), "apiVersion: v1\nmetadata: {name: b, namespace: ns}\n"),
			wantCode: 2,
			wantErr:  "$IN: document 1, item 2 (ns/b): object has no apiVersion and kind",
		},
		{
			name:     "an item that is not an object exits 2 naming the item",
			input:    pod("ns", "first") + "---\n" + listOf(pod("ns", "a"), "just text"),
			wantCode: 2,
			wantErr:  "$IN: document 2, item 2 is not an object (a mapping with apiVersion and kind)",
		},
		{
			name:     "a List inside a List exits 2 naming the item",
			input:    listOf(pod("ns", "a"), listOf(pod("ns", "b"))),
			wantCode: 2,
			wantErr:  "$IN: document 1, item 2 (v1/List): a List inside a List: give its items in the outer List",
		},
		{
			name:     "a List whose items is not an array exits 2 naming the document",
			input:    "apiVersion: v1\nkind: List\nitems: {a: b}\n",
			wantCode: 2,
			wantErr:  "$IN: document 1 of 1: a List: items is not a JSON array",
		},
		{
			name:     "an item's failing hook exits 1 naming the item and prints nothing",
			input:    listOf(pod("ns", "a"), "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ns, labels: {team: [x]}}\n"),
			wantCode: 1,
			wantErr:  "synchook mutate: document 1, item 2 (v1/Pod ns/b): decode Pod object: metadata.labels: ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := writeFile(t, "in.yaml", tc.input)
			args := append([]string{"mutate", "--type", "CreatePhysical", "--config", config, "-f", in}, tc.args...)
			code, out, errOut := runCLI(t, args...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s\nstdout:\n%s", code, tc.wantCode, errOut, out)
			}
			if wantErr := strings.ReplaceAll(tc.wantErr, "$IN", in); !strings.Contains(errOut, wantErr) {
				t.Errorf("stderr %q lacks %q", errOut, wantErr)
			}
			if len(tc.wantOut) == 0 && out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			wantInOrder(t, out, tc.wantOut)
			if tc.notOut != "" && strings.Contains(out, tc.notOut) {
				t.Errorf("output holds %q:\n%s", tc.notOut, out)
			}
		})
	}
}

// The rule of a kind's list's items without apiVersion and kind is apimachinery's: each item's
// apiVersion and kind as mutateListItems gives them are what UnstructuredList's decode gives.
func TestMutateListItemsTakeTheirKindAsUnstructuredListDoes(t *testing.T) {
	for _, tc := range []struct{ name, list string }{
		{"a PodList as the API sends it", podList},
		{"an apps/v1 DeploymentList", `{"apiVersion":"apps/v1","kind":"DeploymentList","items":[{"metadata":{"name":"d"}},{}]}`},
		{"a PodList whose items have only a kind or only an apiVersion keeps them", `{"apiVersion":"v1","kind":"PodList","items":[{"kind":"Pod"},{"apiVersion":"v1"}]}`},
		{"a PodList holding another kind keeps that kind", `{"apiVersion":"v1","kind":"PodList","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, isList, err := mutateListItems([]byte(tc.list))
			if err != nil || !isList {
				t.Fatalf("list %v, error %v", isList, err)
			}
			var want unstructured.UnstructuredList
			if err := want.UnmarshalJSON([]byte(tc.list)); err != nil {
				t.Fatal(err)
			}
			if len(items) != len(want.Items) {
				t.Fatalf("%d items, UnstructuredList has %d", len(items), len(want.Items))
			}
			for i, item := range items {
				var got unstructured.Unstructured
				if err := got.UnmarshalJSON(item); err != nil && !strings.Contains(err.Error(), "Object 'Kind' is missing") {
					t.Fatalf("item %d %s: %v", i+1, item, err)
				}
				if got.GetAPIVersion() != want.Items[i].GetAPIVersion() || got.GetKind() != want.Items[i].GetKind() {
					t.Errorf("item %d: %q %q, UnstructuredList's %q %q", i+1, got.GetAPIVersion(), got.GetKind(), want.Items[i].GetAPIVersion(), want.Items[i].GetKind())
				}
			}
		})
	}
}
