package hooktest_test

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/hooktest"
)

const labelsConfig = `
hooks:
  - name: team
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    labels: {labels: {team: a}}
`

const pod = `
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: ns, labels: {app: web}}
spec: {containers: [{name: web, image: nginx}]}
`

// dir writes files (name → content) into a fresh directory and returns it.
func dir(t *testing.T, files map[string]string) string {
	t.Helper()
	d := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// run runs Main on d and returns the exit code, stdout and stderr. A directory of the test's
// own (absolute: t.TempDir) is the root unless opts says another.
func run(t *testing.T, d string, opts hooktest.Options, junit bool) (int, string, string) {
	t.Helper()
	if opts.Root == "" && filepath.IsAbs(d) {
		opts.Root = d
	}
	var out, errOut bytes.Buffer
	code := hooktest.Main(t.Context(), []string{d}, opts, junit, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestACaseThatHoldsPassesAndABrokenOneFailsWithADiff(t *testing.T) {
	test := `
config: config.yaml
cases:
  - name: the label
    object: pod.yaml
    expect:
      match: subset
      object: {metadata: {labels: {app: web, team: %s}}}
`
	d := dir(t, map[string]string{"config.yaml": labelsConfig, "pod.yaml": pod, hooktest.FileName: strings.Replace(test, "%s", "a", 1)})
	if code, out, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK || !strings.Contains(out, "--- PASS: ") || !strings.Contains(out, "ok\t1 cases in 1 files") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// broken on purpose: the expectation says team b
	d = dir(t, map[string]string{"config.yaml": labelsConfig, "pod.yaml": pod, hooktest.FileName: strings.Replace(test, "%s", "b", 1)})
	code, out, _ := run(t, d, hooktest.Options{}, false)
	for _, want := range []string{"--- FAIL: ", "the result does not contain the expected fields (-expected +got)", "-    team: b", "+    team: a", "FAIL\t1 of 1 cases failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != hooktest.ExitFailed {
		t.Errorf("exit %d, want %d", code, hooktest.ExitFailed)
	}
}

func TestAMalformedTestFileExitsTwoNamingTheKey(t *testing.T) {
	for name, tt := range map[string]struct{ file, want string }{
		"a misspelt key":                    {"config: config.yaml\ncases:\n  - name: a\n    object: pod.yaml\n    expect: {mach: subset}\n", `unknown field "mach"`},
		"no object":                         {"config: config.yaml\ncases:\n  - name: a\n", "cases[0].object: required"},
		"a bad hook type":                   {"config: config.yaml\ncases:\n  - name: a\n    type: CreatPhysical\n    object: pod.yaml\n", `cases[0].type: unknown hook type "CreatPhysical"`},
		"a duplicate name":                  {"config: config.yaml\ncases:\n  - {name: a, object: pod.yaml}\n  - {name: a, object: pod.yaml}\n", `cases[1].name: "a" is cases[0].name already`},
		"a bad readKeeps":                   {"config: config.yaml\ncases:\n  - name: a\n    object: pod.yaml\n    expect: {readKeeps: [spec]}\n", `cases[0].expect.readKeeps[0]: "spec" is not a JSON Pointer`},
		"an invalid config":                 {"config: bad.yaml\ncases:\n  - {name: a, object: pod.yaml}\n", `bad.yaml": invalid synchook config: hooks[0]: unknown field "lables"`},
		"an object file that repeats a key": {"config: config.yaml\ncases:\n  - {name: a, object: twice.yaml}\n", `cases[0].object: twice.yaml: yaml: unmarshal errors:`},
	} {
		t.Run(name, func(t *testing.T) {
			d := dir(t, map[string]string{"config.yaml": labelsConfig, "bad.yaml": "hooks:\n  - lables: {}\n", "pod.yaml": pod, "twice.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: x, labels: {a: b}, labels: {c: d}}\n", hooktest.FileName: tt.file})
			code, _, errOut := run(t, d, hooktest.Options{}, false)
			if code != hooktest.ExitInvalid || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, hooktest.FileName) {
				t.Errorf("exit %d, stderr %q; want %d naming the file and %q", code, errOut, hooktest.ExitInvalid, tt.want)
			}
		})
	}
}

// The round trip is checked for every write case without the test asking for it: a hook whose
// change the read does not take off (undo: false) fails; a declared kept entry passes.
func TestAWriteWhoseReadLeavesATraceFailsTheRoundTripUnlessDeclared(t *testing.T) {
	noUndo := strings.Replace(labelsConfig, "labels: {labels: {team: a}}", "labels: {labels: {team: a}}\n    undo: false", 1)
	test := "config: config.yaml\ncases:\n  - name: the label\n    object: pod.yaml\n"
	d := dir(t, map[string]string{"config.yaml": noUndo, "pod.yaml": pod, hooktest.FileName: test})
	code, out, _ := run(t, d, hooktest.Options{}, false)
	if code != hooktest.ExitFailed || !strings.Contains(out, "the read (GetPhysical) does not give the syncer back what it sent") || !strings.Contains(out, "+    team: a") {
		t.Errorf("exit %d, want %d with the round trip's diff:\n%s", code, hooktest.ExitFailed, out)
	}
	d = dir(t, map[string]string{"config.yaml": noUndo, "pod.yaml": pod, hooktest.FileName: test + "    expect: {readKeeps: [/metadata/labels/team]}\n"})
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("with readKeeps: exit %d:\n%s", code, out)
	}
	// with undo on, the read gives the syncer its object back
	d = dir(t, map[string]string{"config.yaml": labelsConfig, "pod.yaml": pod, hooktest.FileName: test})
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("undo on: exit %d:\n%s", code, out)
	}
}

func TestTheUndoIsComparedByItsEntriesAndUpdateWritesTheExpectation(t *testing.T) {
	test := "config: config.yaml\ncases:\n  - name: the label\n    object: pod.yaml\n    expect: {object: pod.expected.yaml}\n"
	d := dir(t, map[string]string{"config.yaml": labelsConfig, "pod.yaml": pod, "pod.expected.yaml": "{}", hooktest.FileName: test})
	if code, out, _ := run(t, d, hooktest.Options{Update: true}, false); code != hooktest.ExitOK || !strings.Contains(out, "--- UPDATED: ") {
		t.Fatalf("--update: exit %d:\n%s", code, out)
	}
	written, err := os.ReadFile(filepath.Join(d, "pod.expected.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(written), "team: a") || strings.Contains(string(written), "synchook.io/undo") {
		t.Fatalf("the expectation written:\n%s", written)
	}
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Fatalf("after --update: exit %d:\n%s", code, out)
	}
	// an expectation that names the undo compares its opened entries, never its sealed bytes
	entries := `[{"path":"/metadata/annotations","hooked":{}},{"path":"/metadata/labels/team","hooked":"a"}]`
	withUndo := strings.Replace(string(written), "metadata:\n", "metadata:\n  annotations:\n    synchook.io/undo: '"+entries+"'\n", 1)
	if err := os.WriteFile(filepath.Join(d, "pod.expected.yaml"), []byte(withUndo), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("with the undo's entries: exit %d:\n%s\n%s", code, out, withUndo)
	}
	wrong := strings.Replace(withUndo, "/metadata/labels/team", "/metadata/labels/other", 1)
	if err := os.WriteFile(filepath.Join(d, "pod.expected.yaml"), []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitFailed || !strings.Contains(out, "/metadata/labels/team") {
		t.Errorf("with other entries: exit %d:\n%s", code, out)
	}
}

func TestJUnitOutput(t *testing.T) {
	test := "config: config.yaml\ncases:\n  - name: ok\n    object: pod.yaml\n  - name: broken\n    object: pod.yaml\n    expect: {error: never}\n"
	d := dir(t, map[string]string{"config.yaml": labelsConfig, "pod.yaml": pod, hooktest.FileName: test})
	code, out, _ := run(t, d, hooktest.Options{}, true)
	var suites struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(out), &suites); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if code != hooktest.ExitFailed || len(suites.Suites) != 1 || suites.Suites[0].Tests != 2 || suites.Suites[0].Failures != 1 || suites.Suites[0].Cases[1].Failure == nil {
		t.Errorf("exit %d, report:\n%s", code, out)
	}
}

func TestARefusedConfigIsAnExpectation(t *testing.T) {
	bad := "hooks:\n  - name: mirror\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    image: {rules: [{from: ghcr.io, to: ghcr.io/mirror}]}\n"
	d := dir(t, map[string]string{"config.yaml": bad, hooktest.FileName: "config: config.yaml\nconfigError: overlap\n"})
	if code, out, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("exit %d:\n%s%s", code, out, errOut)
	}
	d = dir(t, map[string]string{"config.yaml": labelsConfig, hooktest.FileName: "config: config.yaml\nconfigError: overlap\n"})
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitFailed || !strings.Contains(out, "the config was accepted") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestProvenanceIsComparedWithoutTheBuildVersion(t *testing.T) {
	test := "config: config.yaml\ncases:\n  - name: the label\n    object: pod.yaml\n    expect: {object: pod.expected.yaml}\n"
	d := dir(t, map[string]string{"config.yaml": "provenance: true\n" + labelsConfig, "pod.yaml": pod, "pod.expected.yaml": "{}", hooktest.FileName: test})
	if code, out, _ := run(t, d, hooktest.Options{Update: true}, false); code != hooktest.ExitOK {
		t.Fatalf("--update: exit %d:\n%s", code, out)
	}
	written, err := os.ReadFile(filepath.Join(d, "pod.expected.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(written), "synchook.io/mutated-by: team#") {
		t.Fatalf("the expectation written has no provenance without a version:\n%s", written)
	}
	// an expectation written by another build (another version) still holds
	other := strings.Replace(string(written), "mutated-by: team#", "mutated-by: team@v0.9.1#", 1)
	if err := os.WriteFile(filepath.Join(d, "pod.expected.yaml"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("with another build's version: exit %d:\n%s", code, out)
	}
}

// write writes files (name → content, name relative to d, parent directories made) into d.
func write(t *testing.T, d string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A kubeconfig, a file of the user's outside the tree that --update must not touch: it holds a
// YAML object, so reading it as an expectation succeeds (and differs from the result).
const kubeconfig = "apiVersion: v1\nkind: Config\nclusters: [{name: prod, cluster: {server: https://prod:6443}}]\ncurrent-context: prod\n"

// --update writes only regular files inside the directory of the test file: an expected object
// named through "..", a symbolic link out of the tree (the file's or a parent directory's) or an
// absolute path is left byte for byte as it was, and the run exits 2 naming it.
func TestUpdateWritesOnlyInsideTheTestFilesTree(t *testing.T) {
	for name, tt := range map[string]struct {
		expect string                                   // the test file's expect.object
		setup  func(t *testing.T, tree, outside string) // links made in the tree
		want   string                                   // in stderr
	}{
		"a .. escape": {expect: "../../kubeconfig", want: "../../kubeconfig"},
		// (relative links: an absolute one is refused already when the case reads it, os.Root)
		"a symbolic link to a file outside": {expect: "pod.expected.yaml", want: "pod.expected.yaml", setup: func(t *testing.T, tree, _ string) {
			symlink(t, filepath.Join("..", "..", "kubeconfig"), filepath.Join(tree, "pod.expected.yaml"))
		}},
		"a symbolic link to a directory outside": {expect: "expected/kubeconfig", want: "expected/kubeconfig", setup: func(t *testing.T, tree, _ string) {
			symlink(t, filepath.Join("..", ".."), filepath.Join(tree, "expected"))
		}},
		"a relative symbolic link out": {expect: "pod.expected.yaml", want: "pod.expected.yaml", setup: func(t *testing.T, tree, _ string) {
			symlink(t, "../../kubeconfig", filepath.Join(tree, "pod.expected.yaml"))
		}},
	} {
		t.Run(name, func(t *testing.T) {
			outside := t.TempDir()
			tree := filepath.Join(outside, "repo", "tests")
			write(t, outside, map[string]string{"kubeconfig": kubeconfig})
			write(t, tree, map[string]string{
				"config.yaml": labelsConfig, "pod.yaml": pod,
				hooktest.FileName: "config: config.yaml\ncases:\n  - name: the label\n    object: pod.yaml\n    expect: {object: " + tt.expect + "}\n",
			})
			if tt.setup != nil {
				tt.setup(t, tree, outside)
			}
			// the root is the whole temporary directory, so the file outside the tree is read
			// (TestTestReadsOnlyInsideItsRoot refuses it with the tree as the root): --update's
			// confinement to the test file's directory is what is tested here
			code, out, errOut := run(t, tree, hooktest.Options{Update: true, Root: outside}, false)
			if code != hooktest.ExitInvalid || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "--update writes only regular files inside the test file's directory") {
				t.Errorf("exit %d, stderr %q; want %d naming %q\n%s", code, errOut, hooktest.ExitInvalid, tt.want, out)
			}
			if got, err := os.ReadFile(filepath.Join(outside, "kubeconfig")); err != nil || string(got) != kubeconfig {
				t.Errorf("the file outside the tree was written (%v):\n%s", err, got)
			}
		})
	}
	// an absolute name is relative to the test file's directory, as when it is read: the file
	// outside is neither read nor written
	t.Run("an absolute path", func(t *testing.T) {
		outside := t.TempDir()
		tree := filepath.Join(outside, "repo", "tests")
		abs := filepath.Join(outside, "kubeconfig")
		write(t, outside, map[string]string{"kubeconfig": kubeconfig})
		write(t, tree, map[string]string{
			"config.yaml": labelsConfig, "pod.yaml": pod,
			hooktest.FileName: "config: config.yaml\ncases:\n  - name: the label\n    object: pod.yaml\n    expect: {object: " + abs + "}\n",
		})
		code, _, errOut := run(t, tree, hooktest.Options{Update: true}, false)
		if code != hooktest.ExitInvalid || !strings.Contains(errOut, abs) {
			t.Errorf("exit %d, stderr %q; want %d naming %q", code, errOut, hooktest.ExitInvalid, abs)
		}
		if got, err := os.ReadFile(abs); err != nil || string(got) != kubeconfig {
			t.Errorf("the file outside the tree was written (%v):\n%s", err, got)
		}
	})
}

// Inside the tree --update still writes: through a subdirectory, a ".." that stays inside and a
// symbolic link to another file of the tree.
func TestUpdateWritesInsideTheTreeThroughSubdirectoriesAndLinks(t *testing.T) {
	tree := t.TempDir()
	write(t, tree, map[string]string{
		"config.yaml": labelsConfig, "pod.yaml": pod,
		"expected/a.yaml": "{}", "expected/b.yaml": "{}", "expected/c.yaml": "{}",
		hooktest.FileName: "config: config.yaml\ncases:\n" +
			"  - {name: a, object: pod.yaml, expect: {object: expected/a.yaml}}\n" +
			"  - {name: b, object: pod.yaml, expect: {object: expected/../expected/b.yaml}}\n" +
			"  - {name: c, object: pod.yaml, expect: {object: c.yaml}}\n",
	})
	symlink(t, "expected/c.yaml", filepath.Join(tree, "c.yaml"))
	if code, out, errOut := run(t, tree, hooktest.Options{Update: true}, false); code != hooktest.ExitOK || strings.Count(out, "--- UPDATED: ") != 3 {
		t.Fatalf("--update: exit %d:\n%s%s", code, out, errOut)
	}
	for _, name := range []string{"a", "b", "c"} {
		got, err := os.ReadFile(filepath.Join(tree, "expected", name+".yaml"))
		if err != nil || !strings.Contains(string(got), "team: a") {
			t.Errorf("expected/%s.yaml (%v):\n%s", name, err, got)
		}
	}
	if st, err := os.Lstat(filepath.Join(tree, "c.yaml")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("c.yaml is no longer a link (%v)", err)
	}
	if code, out, _ := run(t, tree, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Errorf("after --update: exit %d:\n%s", code, out)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// A namespace the test file does not list does not exist: a hook that reads it fails the
// request naming it (as under vcluster, where it is an error too), never runs as if the
// namespace had no labels.
func TestANamespaceTheFileDoesNotListFailsTheRequestNamingIt(t *testing.T) {
	config := `
hooks:
  - name: team-from-namespace
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels: {fromNamespace: {keys: [team]}}
`
	test := `
config: config.yaml
namespaces:
  - metadata: {name: payments, labels: {team: payments}}
cases:
  - name: a listed namespace gives its labels
    object: {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: payments}, spec: {containers: [{name: web, image: nginx}]}}
    expect: {match: subset, object: {metadata: {labels: {team: payments}}}}
  - name: an unlisted one fails the request
    object: pod.yaml
    expect: {error: 'fromNamespace: namespace "ns": namespace not found (the test file''s namespaces: does not list it)'}
`
	d := dir(t, map[string]string{"config.yaml": config, "pod.yaml": pod, hooktest.FileName: test})
	if code, out, errOut := run(t, d, hooktest.Options{}, false); code != hooktest.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// Without the error expected, the case fails with it.
	unexpected := strings.Replace(test, "    expect: {error: 'fromNamespace: namespace \"ns\": namespace not found (the test file''s namespaces: does not list it)'}\n", "", 1)
	d = dir(t, map[string]string{"config.yaml": config, "pod.yaml": pod, hooktest.FileName: unexpected})
	code, out, _ := run(t, d, hooktest.Options{}, false)
	if code != hooktest.ExitFailed || !strings.Contains(out, `namespace "ns"`) {
		t.Errorf("exit %d, want %d and the output naming namespace ns:\n%s", code, hooktest.ExitFailed, out)
	}
}
