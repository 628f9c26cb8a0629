package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// synchook test reads only inside the working directory, or --root: from the repository's
// plugin directory the examples (which name ../../plugin.yaml) pass with --root .., and
// without it they are refused, exit 2 naming them; a test file that names an object outside its
// root by ".." or by a symbolic link is refused, exit 2 naming it, and nothing of the object
// is printed.
func TestTestReadsOnlyInsideTheWorkingDirectoryOrRoot(t *testing.T) {
	const marker = "OUTSIDE-0451"
	outside := t.TempDir()
	root := filepath.Join(outside, "root")
	for name, content := range map[string]string{
		filepath.Join(outside, "outside.yaml"):              "apiVersion: v1\nkind: Pod\nmetadata: {name: " + marker + "}\n",
		filepath.Join(root, "dotdot", "synchook-test.yaml"): "cases: [{name: a, object: ../../outside.yaml}]\n",
		filepath.Join(root, "link", "synchook-test.yaml"):   "cases: [{name: a, object: pod.yaml}]\n",
		filepath.Join(root, "inside", "synchook-test.yaml"): "cases: [{name: a, object: ../pod.yaml}]\n",
		filepath.Join(root, "pod.yaml"):                     "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ns}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join("..", "..", "outside.yaml"), filepath.Join(root, "link", "pod.yaml")); err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs(filepath.Join("..", "examples", "features"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cwd string
		args      []string
		code      int
		stderr    string
	}{
		{name: "examples/features and plugin-yaml (values: ../../plugin.yaml) pass with --root the repository", args: []string{"test", "../examples/features/", "../examples/plugin-yaml", "--root", ".."}, code: 0},
		{
			name: "examples/plugin-yaml is refused with --root examples", args: []string{"test", "../examples/plugin-yaml", "--root", "../examples"}, code: 2,
			stderr: "synchook test: invalid test file ../examples/plugin-yaml/synchook-test.yaml: values: ../plugin.yaml: outside the root ",
		},
		{name: "examples/features are refused from plugin without --root", args: []string{"test", "../examples/features/"}, code: 2, stderr: "synchook test: ../examples/features/: outside the root "},
		{
			name: "an object named by .. out of the working directory is refused", cwd: root, args: []string{"test", "dotdot"}, code: 2,
			stderr: "synchook test: invalid test file dotdot/synchook-test.yaml: cases[0].object: ../outside.yaml: outside the root " + root + " ",
		},
		{
			name: "an object that is a symbolic link out of the working directory is refused", cwd: root, args: []string{"test", "link"}, code: 2,
			stderr: "synchook test: invalid test file link/synchook-test.yaml: cases[0].object: link/pod.yaml: outside the root " + root + ", by a symbolic link ",
		},
		{
			name: "an object named by .. out of --root is refused", cwd: root, args: []string{"test", "inside", "--root", "inside"}, code: 2,
			stderr: "cases[0].object: pod.yaml: outside the root " + filepath.Join(root, "inside") + " ",
		},
		{name: "an object named by .. inside the working directory is read", cwd: root, args: []string{"test", "inside"}, code: 0},
		{name: "--root the examples' parent from elsewhere", cwd: outside, args: []string{"test", examples, "--root", filepath.Dir(filepath.Dir(examples))}, code: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cwd != "" {
				t.Chdir(tc.cwd)
			}
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d, want %d; stderr %q, want %q\n%s", code, tc.code, errOut, tc.stderr, out)
			}
			if strings.Contains(out+errOut, marker) {
				t.Errorf("the file outside the root is printed:\n%s%s", out, errOut)
			}
		})
	}
}
