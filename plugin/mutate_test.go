package plugin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// writeFile writes text to name in a new temporary directory and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func pod(namespace, name string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: " + namespace +
		"\nspec:\n  containers: [{name: c, image: nginx}]\n"
}

func TestMutateRunsEveryDocumentInOrder(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	twoPods := "# two pods\n" + pod("default", "web") + "---\n" + pod("shop", "api") + "---\n"
	in := writeFile(t, "pods.yaml", twoPods)
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  []string // in this order
	}{
		{
			"a file of two documents and a trailing --- prints both, each under its header",
			[]string{"-f", in},
			"",
			[]string{
				"# document 1 of 2: v1/Pod default/web\n# JSON Patch (CreatePhysical, hooks run: 1)\n", "\n---\n# Result\n", `synchook.io/hooked: "true"`, "name: web",
				"\n---\n# document 2 of 2: v1/Pod shop/api\n# JSON Patch (CreatePhysical, hooks run: 1)\n", "\n---\n# Result\n", `synchook.io/hooked: "true"`, "name: api",
			},
		},
		{
			"stdin of two documents, as YAML for scripts, prints two YAML documents",
			[]string{"-f", "-", "-o", "yaml"},
			twoPods,
			[]string{"apiVersion: v1\n", `synchook.io/hooked: "true"`, "name: web", "\n---\napiVersion: v1\n", `synchook.io/hooked: "true"`, "name: api"},
		},
		{
			"two documents as JSON print one object a line",
			[]string{"-f", in, "-o", "json"},
			"",
			[]string{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"`, `"synchook.io/hooked":"true"`, "}\n{", `"name":"api"`, `"synchook.io/hooked":"true"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"mutate", "--type", "CreatePhysical"}, tc.args...)
			if code := New().run(args, strings.NewReader(tc.stdin), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			wantInOrder(t, stdout.String(), tc.want)
		})
	}
	t.Run("one document prints as before, without a header", func(t *testing.T) {
		code, out, errOut := runCLI(t, "mutate", "--type", "CreatePhysical", "-f", "../examples/pod.yaml")
		if code != 0 || !strings.HasPrefix(out, "# JSON Patch (CreatePhysical, hooks run: 1)\n") || strings.Contains(out, "# document") {
			t.Errorf("exit %d, stderr %s, output:\n%s", code, errOut, out)
		}
	})
}

func TestMutateChecksEveryDocumentBeforePrintingAny(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	for _, tc := range []struct {
		name, input, want string
	}{
		{"a document without a kind", pod("default", "web") + "---\napiVersion: v1\nmetadata: {name: x}\n", "document 2 of 2: object has no apiVersion and kind"},
		{"a document that is not YAML", pod("default", "web") + "---\n" + pod("default", "api") + "---\nkind: [\n", "document 3 is not YAML or JSON"},
		{"a document that repeats a key, as kubectl refuses", pod("default", "web") + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: x, labels: {a: b}, labels: {c: d}}\n", "document 2 is not YAML or JSON: yaml: unmarshal errors:\n  line 3: key \"labels\" already set in map"},
		{"a document that is a list", "- a\n- b\n---\n" + pod("default", "web"), "document 1 of 2 is not an object"},
		{"only empty documents", "---\n# nothing\n---\n", "no object"},
	} {
		t.Run(tc.name+" exits 2 naming it and prints nothing", func(t *testing.T) {
			in := writeFile(t, "in.yaml", tc.input)
			code, out, errOut := runCLI(t, "mutate", "--type", "CreatePhysical", "-f", in)
			if code != 2 || !strings.Contains(errOut, in+": "+tc.want) || out != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want 2, %q and nothing", code, errOut, out, tc.want)
			}
		})
	}
}

// teamFromNamespace is a config that labels pods with their namespace's team label.
const teamFromNamespace = `hooks:
  - name: team-from-namespace
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels: {fromNamespace: {keys: [team]}}
`

func TestMutateLooksNamespacesUpInTheNamespacesFile(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	config := writeFile(t, "config.yaml", teamFromNamespace)
	shop := "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {team: payments}}\n"
	other := "apiVersion: v1\nkind: Namespace\nmetadata: {name: other, labels: {team: nobody}}\n"
	hostPod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: api-x-shop-x-vc\n  namespace: vc-host\n" +
		"  annotations: {vcluster.loft.sh/object-namespace: shop}\nspec:\n  containers: [{name: c, image: nginx}]\n"
	for _, tc := range []struct {
		name       string
		input      string
		namespaces string // the --namespaces file; empty: no flag
		flags      []string
		wantCode   int
		want       string // in the resulting object (code 0) or on stderr
	}{
		{"a Namespace document gives its label", pod("shop", "api"), other + "---\n" + shop, nil, 0, "team: payments"},
		{"a v1 List of Namespaces gives its label", pod("shop", "api"), "apiVersion: v1\nkind: List\nitems:\n- " +
			strings.TrimSpace(strings.ReplaceAll(other, "\n", "\n  ")) + "\n- " + strings.TrimSpace(strings.ReplaceAll(shop, "\n", "\n  ")) + "\n", nil, 0, "team: payments"},
		{
			"a NamespaceList as the API sends it, items without apiVersion and kind, gives its label", pod("shop", "api"),
			`{"kind":"NamespaceList","apiVersion":"v1","items":[{"metadata":{"name":"other"}},{"metadata":{"name":"shop","labels":{"team":"payments"}}}]}`, nil, 0, "team: payments",
		},
		{"a namespace in a List that is not one is refused naming the item", pod("shop", "api"), listOf(shop, pod("shop", "x")), nil, 2, `document 1, item 2: apiVersion "v1" kind "Pod", want v1 Namespace`},
		{"--virtual-namespaces reads the namespace vcluster's annotation names", hostPod, shop, []string{"--virtual-namespaces"}, 0, "team: payments"},
		{
			"no --namespaces fails naming the namespace and the flag", pod("shop", "api"), "", nil, 1,
			`document 1 of 1: v1/Pod shop/api: hook "team-from-namespace" CreatePhysical Pod: fromNamespace: namespace "shop": namespace not found (synchook mutate reads no cluster: give the Namespace with --namespaces FILE)`,
		},
		{
			"a namespace the file does not hold fails naming it", pod("default", "web") + "---\n" + pod("shop", "api"), shop, nil, 1,
			`document 1 of 2: v1/Pod default/web: hook "team-from-namespace" CreatePhysical Pod: fromNamespace: namespace "default": namespace not found (--namespaces `,
		},
		{"a Pod in the namespaces file is refused", pod("shop", "api"), shop + "---\n" + pod("shop", "x"), nil, 2, `document 2: apiVersion "v1" kind "Pod", want v1 Namespace`},
		{"a field typo in the namespaces file is refused", pod("shop", "api"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, lables: {team: a}}\n", nil, 2, `document 1: error unmarshaling JSON: while decoding JSON: json: unknown field "lables"`},
		{"a namespace given twice is refused", pod("shop", "api"), shop + "---\n" + shop, nil, 2, `document 2: namespace "shop" given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"mutate", "--type", "CreatePhysical", "--config", config, "-o", "yaml", "-f", writeFile(t, "in.yaml", tc.input)}
			if tc.namespaces != "" {
				args = append(args, "--namespaces", writeFile(t, "namespaces.yaml", tc.namespaces))
			}
			code, out, errOut := runCLI(t, append(args, tc.flags...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.wantCode, errOut)
			}
			if code != 0 {
				if !strings.Contains(errOut, tc.want) || out != "" {
					t.Errorf("stderr %q, stdout %q; want %q and nothing", errOut, out, tc.want)
				}
				return
			}
			var got corev1.Pod
			if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if got.Labels["team"] != "payments" {
				t.Errorf("labels %v, want team: payments", got.Labels)
			}
		})
	}
}

// wantInOrder fails t unless out holds each of wants, each after the one before it.
func wantInOrder(t *testing.T, out string, wants []string) {
	t.Helper()
	rest := out
	for _, want := range wants {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("output lacks %q after what came before it:\n%s", want, out)
		}
		rest = rest[i+len(want):]
	}
}
