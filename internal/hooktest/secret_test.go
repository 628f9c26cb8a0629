package hooktest_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/canary"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/hooktest"
)

// stripPassword strips a Secret's data.password on CreatePhysical (its undo entry holds the
// value), and its stringData.note on UpdateVirtual without undo (so the read keeps the change
// and the round trip fails).
const stripPassword = `
hooks:
  - name: strip-password
    resources: [{apiVersion: v1, kind: Secret}]
    types: [CreatePhysical]
    strip: {paths: [/data/password]}
  - name: strip-note
    resources: [{apiVersion: v1, kind: Secret}]
    types: [UpdateVirtual]
    strip: {paths: [/stringData/note]}
    undo: false
`

// synchook test prints no form of a Secret's value (canary.Forms: raw, base64, hex, Go-quoted,
// …) in any failure it reports: the expected-object diff (the Secret's data and stringData,
// its undo's opened entries and kubectl's last-applied annotation), the round trip's diff, and
// a request's error (a Go hook that puts the value in its error or panic, every way
// canary.Leaks knows), on stdout, on stderr and in the JUnit file; the diff still names the
// key that differs.
func TestTestPrintsNoFormOfASecretValue(t *testing.T) {
	files := map[string]string{"config.yaml": stripPassword, "secret.yaml": string(canary.SecretJSON(-1))}
	cases := `config: config.yaml
cases:
  - name: the expected object differs
    object: secret.yaml
    expect:
      noRoundTrip: true
      object:
        apiVersion: v1
        kind: Secret
        metadata: {name: db, namespace: tenant, annotations: {synchook.io/undo: "[]"}}
        data: {password: b3RoZXI=}
  - name: the round trip does not give the Secret back
    type: UpdateVirtual
    object: secret.yaml
`
	for i := range canary.Leaks {
		name := fmt.Sprintf("leak-%d.yaml", i)
		files[name] = string(canary.SecretJSON(i))
		cases += fmt.Sprintf("  - {name: leak %d fails otherwise, type: UpdatePhysical, object: %s, expect: {error: not this error}}\n", i, name)
		cases += fmt.Sprintf("  - {name: leak %d fails, type: UpdatePhysical, object: %s}\n", i, name)
	}
	files[hooktest.FileName] = cases
	d := dir(t, files)
	register := func(r *engine.Registry) error {
		return r.Register(canary.Hook("leaky", hooks.UpdatePhysical))
	}
	wantFailed := 2 + 2*len(canary.Leaks)
	for _, junit := range []bool{false, true} {
		t.Run(fmt.Sprintf("with junit %v every case fails and no form of the value is printed", junit), func(t *testing.T) {
			code, out, errOut := run(t, d, hooktest.Options{Register: register}, junit)
			if code != hooktest.ExitFailed {
				t.Fatalf("exit %d, want %d\n%s%s", code, hooktest.ExitFailed, out, errOut)
			}
			failed := strings.Count(out, "--- FAIL: ")
			if junit {
				failed = strings.Count(out, "<failure ")
			}
			if failed != wantFailed {
				t.Errorf("%d cases failed, want %d:\n%s", failed, wantFailed, out)
			}
			canary.Check(t, "stdout", out, canary.Value)
			canary.Check(t, "stderr", errOut, canary.Value)
			// the diffs show the keys, and the values as their MACs
			for _, want := range []string{"password: hmac-sha256:", "note: hmac-sha256:", `"path":"/data/password","original":"hmac-sha256:`, "the read (GetVirtual) does not give the syncer back what it sent"} {
				if junit {
					want = strings.ReplaceAll(want, `"`, "&#34;")
				}
				if !strings.Contains(out, want) {
					t.Errorf("the output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// The files a test names are read inside its root only (the working directory, or --root): a
// path that leaves it by "..", an absolute symbolic link and a relative one that leads out
// are refused with exit 2 naming them, and nothing of the file outside is printed; a ".." or a
// link that stays inside is read. The refusal holds for every key that names a file.
func TestTestReadsOnlyInsideItsRoot(t *testing.T) {
	const secretText = "OUTSIDE-THE-ROOT-0451"
	outsideObject := "apiVersion: v1\nkind: Pod\nmetadata: {name: " + secretText + "}\n"
	passing := "  - {name: a, object: pod.yaml, expect: {match: subset, object: {metadata: {labels: {team: a}}}}}\n"
	for _, tt := range []struct {
		name  string
		test  string                                   // the test file (in root/tests)
		setup func(t *testing.T, root, outside string) // links, files
		want  string                                   // in stderr; "" passes
	}{
		{
			name: "an object named through .. out of the root is refused",
			test: "config: config.yaml\ncases:\n  - {name: a, object: ../../outside.yaml}\n",
			want: "cases[0].object: " + filepath.Join("..", "outside.yaml") + ": outside the root",
		},
		{
			name: "an object that is a symbolic link out of the root is refused",
			test: "config: config.yaml\ncases:\n  - {name: a, object: link.yaml}\n",
			setup: func(t *testing.T, root, outside string) {
				symlink(t, filepath.Join(outside, "outside.yaml"), filepath.Join(root, "tests", "link.yaml"))
			},
			want: "cases[0].object: " + filepath.Join("tests", "link.yaml") + ": outside the root",
		},
		{
			name: "an object in a directory that is a relative symbolic link out is refused",
			test: "config: config.yaml\ncases:\n  - {name: a, object: out/outside.yaml}\n",
			setup: func(t *testing.T, root, _ string) {
				symlink(t, filepath.Join("..", ".."), filepath.Join(root, "tests", "out"))
			},
			want: "cases[0].object: " + filepath.Join("tests", "out", "outside.yaml") + ": outside the root",
		},
		{
			name: "an oldObject out of the root is refused",
			test: "config: config.yaml\ntransport: admission\ncases:\n  - {name: a, type: UpdatePhysical, object: pod.yaml, oldObject: ../../outside.yaml}\n",
			want: "cases[0].oldObject: " + filepath.Join("..", "outside.yaml") + ": outside the root",
		},
		{
			name: "an expected object out of the root is refused",
			test: "config: config.yaml\ncases:\n  - {name: a, object: pod.yaml, expect: {object: ../../outside.yaml}}\n",
			want: "cases[0].expect.object: " + filepath.Join("..", "outside.yaml") + ": outside the root",
		},
		{
			name: "a config out of the root is refused",
			test: "config: ../../outside.yaml\ncases:\n" + passing,
			want: "config: read config: " + filepath.Join("..", "outside.yaml") + ": outside the root",
		},
		{
			name: "a values file out of the root is refused",
			test: "values: ../../outside.yaml\ncases:\n" + passing,
			want: "values: " + filepath.Join("..", "outside.yaml") + ": outside the root",
		},
		{
			name: "a policyFile of a config file, relative to it, out of the root is refused",
			test: "config: policy-config.yaml\ncases:\n" + passing,
			setup: func(t *testing.T, root, _ string) {
				write(t, root, map[string]string{"tests/policy-config.yaml": "hooks:\n  - {name: team, types: [CreatePhysical], policyFile: ../../outside.yaml}\n"})
			},
			want: "hooks[0].policyFile: Invalid value: " + filepath.Join("..", "outside.yaml") + ": outside the root",
		},
		{
			name: "an absolute policyFile of the inline config out of the root is refused",
			test: "config: {hooks: [{name: team, types: [CreatePhysical], policyFile: OUTSIDE}]}\ncases:\n" + passing,
			want: "hooks[0].policyFile: Invalid value: OUTSIDE: outside the root",
		},
		{
			name: "a test file that is a symbolic link out of the root is refused",
			test: "config: config.yaml\ncases:\n" + passing,
			setup: func(t *testing.T, root, outside string) {
				write(t, outside, map[string]string{"x." + hooktest.FileName: "cases: [{name: " + secretText + "}]\n"})
				symlink(t, filepath.Join(outside, "x."+hooktest.FileName), filepath.Join(root, "tests", "x."+hooktest.FileName))
			},
			want: filepath.Join("tests", "x."+hooktest.FileName) + ": outside the root",
		},
		{
			name: "a .. and a relative link that stay inside the root are read",
			test: "config: ../tests/config.yaml\ncases:\n  - {name: a, object: inside.yaml, expect: {match: subset, object: {metadata: {labels: {team: a}}}}}\n",
			setup: func(t *testing.T, root, _ string) {
				symlink(t, "pod.yaml", filepath.Join(root, "tests", "inside.yaml"))
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			outside := t.TempDir()
			root := filepath.Join(outside, "root")
			write(t, outside, map[string]string{"outside.yaml": outsideObject})
			write(t, root, map[string]string{
				"tests/config.yaml": labelsConfig, "tests/pod.yaml": pod,
				"tests/" + hooktest.FileName: strings.ReplaceAll(tt.test, "OUTSIDE", filepath.Join(outside, "outside.yaml")),
			})
			if tt.setup != nil {
				tt.setup(t, root, outside)
			}
			t.Chdir(root)
			code, out, errOut := run(t, "tests", hooktest.Options{}, false)
			if tt.want == "" {
				if code != hooktest.ExitOK {
					t.Fatalf("exit %d\n%s%s", code, out, errOut)
				}
				return
			}
			want := strings.ReplaceAll(tt.want, "OUTSIDE", filepath.Join(outside, "outside.yaml"))
			if code != hooktest.ExitInvalid || !strings.Contains(errOut, want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %d and %q", code, errOut, hooktest.ExitInvalid, want)
			}
			if strings.Contains(out+errOut, secretText) {
				t.Errorf("the file outside the root is printed:\n%s%s", out, errOut)
			}
		})
	}
	t.Run("a directory argument out of the root is refused", func(t *testing.T) {
		outside := t.TempDir()
		root := filepath.Join(outside, "root")
		write(t, outside, map[string]string{"tests/" + hooktest.FileName: "cases: [{name: x, object: {}}]\n", "root/a": ""})
		t.Chdir(root)
		code, _, errOut := run(t, filepath.Join("..", "tests"), hooktest.Options{}, false)
		if want := filepath.Join("..", "tests") + ": outside the root"; code != hooktest.ExitInvalid || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, hooktest.ExitInvalid, want)
		}
	})
}
