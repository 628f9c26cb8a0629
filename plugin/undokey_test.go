package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/internal/undo"
)

// TestTenConfigChangesReplayOfflineWithTheKey replays, with `synchook mutate --undo-key-file`,
// what vcluster does across ten config changes (a label value): each read of the stored pod
// gives the pod without any hook trace, each tenant update reaches the stored pod with the
// newest value, and the sealed undo stays small (it never nests an older one).
func TestTenConfigChangesReplayOfflineWithTheKey(t *testing.T) {
	dir := t.TempDir()
	code, keys, errOut := runCLI(t, "undo-key")
	if code != exitOK || !strings.Contains(keys, "the last one seals") {
		t.Fatalf("undo-key: exit %d, %s", code, errOut)
	}
	keyFile := filepath.Join(dir, "keys")
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("keys", keys)
	mutate := func(cfg, typ, obj string) string {
		t.Helper()
		code, out, errOut := runCLI(t, "mutate", "--undo-key-file", keyFile, "--config", cfg, "--type", typ, "-f", obj, "-o", "yaml")
		if code != exitOK {
			t.Fatalf("mutate %s: exit %d: %s", typ, code, errOut)
		}
		return write("object.yaml", out)
	}
	config := func(value string) string {
		return write("config.yaml", "hooks:\n- name: team\n  resources: [{apiVersion: v1, kind: Pod}]\n  types: [CreatePhysical, UpdatePhysical]\n  labels: {labels: {team: \""+value+"\"}}\n")
	}
	read := func(path string) *corev1.Pod {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var p corev1.Pod
		if err := yaml.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	stored := mutate(config("v0"), "CreatePhysical", "../examples/pod.yaml")
	for i := 1; i <= 10; i++ {
		value := "v" + strings.Repeat("1", i)
		cfg := config(value)
		view := read(mutate(cfg, "GetPhysical", stored))
		if _, ok := view.Labels["team"]; ok || len(view.Annotations) > 0 && view.Annotations["synchook.io/undo"] != "" {
			t.Fatalf("change %d: the view carries a hook trace: labels %v annotations %v", i, view.Labels, view.Annotations)
		}
		view.Labels["rev"] = value // the tenant's update
		data, _ := json.Marshal(view)
		stored = mutate(cfg, "UpdatePhysical", write("update.json", string(data)))
		host := read(stored)
		if host.Labels["team"] != value || host.Labels["rev"] != value {
			t.Fatalf("change %d: stored labels %v", i, host.Labels)
		}
		if n := len(host.Annotations["synchook.io/undo"]); n == 0 || n > 2048 {
			t.Fatalf("change %d: stored undo of %d bytes", i, n)
		}
	}
}

// Regression (issue 25): offline mutate changed numbers through its YAML step
// (12345678901234567890123 → 1.2345678901234568e+22, 1E400 → a string); JSON input is taken
// as it is, as the server takes it.
func TestMutateKeepsJSONNumbersExact(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pod.json")
	obj := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"nginx"}],"overhead":{"x":12345678901234567890123},"priority":1E400}}`
	if err := os.WriteFile(file, []byte(obj), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "mutate", "--type", "CreatePhysical", "-f", file, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"x":12345678901234567890123`, `"priority":1E400`} {
		if !strings.Contains(out, want) {
			t.Errorf("the result lacks %s: %s", want, out)
		}
	}
}

// sealWith seals a one-label undo of a pod with ring, as a write of the deployed synchook does.
func sealWith(t *testing.T, ring *undo.Ring) (undo.Identity, string) {
	t.Helper()
	id := undo.Identity{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "web", UID: "7c1d", UIDSource: undo.UIDFromMetadata}
	rec := undo.Record{Writers: []string{"labels@1"}, Entries: []undo.Entry{{Path: "/metadata/labels/team", Hooked: []byte(`"a"`)}}}
	value, err := ring.Seal(id, undo.Physical, rec)
	if err != nil {
		t.Fatal(err)
	}
	return id, value
}

// newKeyFile writes a new ring (synchook undo-key -o) to dir/name with mode, and returns the
// path and the ring.
func newKeyFile(t *testing.T, dir, name string, mode os.FileMode) (string, *undo.Ring) {
	t.Helper()
	path := filepath.Join(dir, name)
	if code, out, errOut := runCLI(t, "undo-key", "-o", path); code != exitOK || out != "" {
		t.Fatalf("undo-key -o: exit %d, stdout %d bytes: %s", code, len(out), errOut)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path, parseKeyFile(t, path)
}

func parseKeyFile(t *testing.T, path string) *undo.Ring {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := undo.ParseRing(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ring
}

// TestUndoKeyRotatesAKeyFileInPlace (issue 50): `undo-key --rotate keys -o keys` replaces keys
// with the ring plus a new key, mode 0600 whatever the mode before: a seal made with the old
// ring still opens, and the new key seals. Its long form --output does the same.
func TestUndoKeyRotatesAKeyFileInPlace(t *testing.T) {
	for _, c := range []struct {
		name   string
		mode   os.FileMode
		output string
	}{
		{"a 0600 key file rotated with -o stays 0600 and keeps its key", 0o600, "-o"},
		{"a 0644 key file (a shell redirect's) rotated with -o becomes 0600 and keeps its key", 0o644, "-o"},
		{"a 0644 key file rotated with --output becomes 0600 and keeps its key", 0o644, "--output"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path, old := newKeyFile(t, dir, "keys", c.mode)
			id, sealed := sealWith(t, old)

			code, out, errOut := runCLI(t, "undo-key", "--rotate", path, c.output, path)
			if code != exitOK || out != "" || errOut != "" {
				t.Fatalf("exit %d, stdout %d bytes, stderr %q", code, len(out), errOut)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if perm := info.Mode().Perm(); perm != 0o600 {
				t.Errorf("mode %04o after the rotation, want 0600", perm)
			}
			ring := parseKeyFile(t, path)
			ids := ring.IDs()
			if len(ids) != 2 || ids[0] != old.IDs()[0] || !ring.Contains(old) {
				t.Fatalf("the ring after the rotation is %v, want %v and a new key", ids, old.IDs())
			}
			if _, keyID, err := ring.Open(id, undo.Physical, sealed); err != nil || keyID != ids[0] {
				t.Errorf("a seal of the old ring: opened by %q, %v; want by %q", keyID, err, ids[0])
			}
			_, resealed := sealWith(t, ring)
			if _, keyID, err := ring.Open(id, undo.Physical, resealed); err != nil || keyID != ids[1] {
				t.Errorf("a seal of the rotated ring: opened by %q, %v; want the new key %q", keyID, err, ids[1])
			}
			if _, _, err := old.Open(id, undo.Physical, resealed); !errors.Is(err, undo.ErrUnknownKey) {
				t.Errorf("the old ring opened a seal of the new key: %v", err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 1 {
				t.Errorf("the directory holds %v (%v), want the key file only (no temporary file left)", entries, err)
			}
		})
	}
}

// TestUndoKeyRotateWritesNothingWhenTheRingCannotBeRead (issue 50): `--rotate keys > keys`
// empties keys before synchook reads it; rotating an empty, missing or unparsable file fails
// (exit 1) with a message naming the file and the cause, and writes nothing: neither the -o
// file nor stdout. Writing into a directory that does not exist fails and creates nothing.
func TestUndoKeyRotateWritesNothingWhenTheRingCannotBeRead(t *testing.T) {
	for _, c := range []struct {
		name     string
		content  *string // nil: the file does not exist
		output   bool    // -o into the --rotate file itself
		want     []string
		wantCode int
	}{
		{"an empty file (what `> keys` leaves) names the redirect and says to use -o", ptr(""), true, []string{"--rotate KEYS: the file is empty", "`> KEYS`", "use -o KEYS", "nothing written"}, exitFailed},
		{"an empty file without -o says the same and prints nothing", ptr(""), false, []string{"the file is empty", "use -o KEYS"}, exitFailed},
		{"a file of blank lines counts as empty", ptr("\n  \n"), true, []string{"the file is empty"}, exitFailed},
		{"a file of comments only holds no key", ptr("# synchook undo keys\n"), true, []string{"--rotate KEYS: the file holds no key"}, exitFailed},
		{"a garbage file names the line", ptr("not a key ring\n"), true, []string{"--rotate KEYS: undo key ring line 1", "nothing written"}, exitFailed},
		{"a key that is not base64 names the line and key ID, never the text", ptr("k1 !!!secret!!!\n"), true, []string{"line 1 (key \"k1\")"}, exitFailed},
		{"a missing file says so", nil, false, []string{"--rotate KEYS: no such file or directory"}, exitFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "keys")
			if c.content != nil {
				if err := os.WriteFile(path, []byte(*c.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"undo-key", "--rotate", path}
			if c.output {
				args = append(args, "-o", path)
			}
			code, out, errOut := runCLI(t, args...)
			if code != c.wantCode || out != "" {
				t.Fatalf("exit %d, stdout %d bytes; want exit %d and no stdout (stderr %q)", code, len(out), c.wantCode, errOut)
			}
			for _, want := range c.want {
				if want = strings.ReplaceAll(want, "KEYS", path); !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q: %q", want, errOut)
				}
			}
			if strings.Contains(errOut, "secret!!!") {
				t.Errorf("stderr shows the file's text: %q", errOut)
			}
			after, err := os.ReadFile(path)
			switch {
			case c.content == nil && !errors.Is(err, os.ErrNotExist):
				t.Errorf("a missing --rotate file was created (%v)", err)
			case c.content != nil && (err != nil || string(after) != *c.content):
				t.Errorf("the file changed: %q (%v), want %q", after, err, *c.content)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 1 || c.content == nil && len(entries) > 0 {
				t.Errorf("the directory holds %d entries: something was written", len(entries))
			}
			if c.content != nil {
				if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o644 {
					t.Errorf("the file's mode changed: %v %v", info.Mode(), err)
				}
			}
		})
	}

	t.Run("-o into a directory that does not exist fails and creates nothing", func(t *testing.T) {
		dir := t.TempDir()
		missing := filepath.Join(dir, "no-such-dir")
		code, out, errOut := runCLI(t, "undo-key", "-o", filepath.Join(missing, "keys"))
		if code != exitFailed || out != "" {
			t.Fatalf("exit %d, stdout %d bytes; want exit 1 and no stdout (stderr %q)", code, len(out), errOut)
		}
		if want := "the directory " + missing + " does not exist"; !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %q", want, errOut)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("created %v", entries)
		}
	})
	t.Run("-o onto a directory fails and leaves it", func(t *testing.T) {
		dir := t.TempDir()
		code, out, errOut := runCLI(t, "undo-key", "-o", dir)
		if code != exitFailed || out != "" || !strings.Contains(errOut, "is a directory") {
			t.Fatalf("exit %d, stdout %d bytes, stderr %q; want exit 1 naming a directory", code, len(out), errOut)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("wrote into the directory: %v", entries)
		}
	})
	t.Run("usage errors exit 2", func(t *testing.T) {
		for _, args := range [][]string{{"undo-key", "extra"}, {"undo-key", "--no-such-flag"}, {"undo-key", "-o"}} {
			if code, out, errOut := runCLI(t, args...); code != exitUsage || out != "" {
				t.Errorf("%v: exit %d, stdout %d bytes; want exit 2 (stderr %q)", args, code, len(out), errOut)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

// docCommandBlocks returns the lines of the ```sh blocks of the Markdown file path under the
// heading "## "+section (up to the next "## " heading).
func docCommandBlocks(t *testing.T, path, section string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks      [][]string
		in, inBlock bool
		cur         []string
	)
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			in = line == "## "+section
		case in && !inBlock && line == "```sh":
			inBlock, cur = true, nil
		case inBlock && line == "```":
			inBlock = false
			blocks = append(blocks, cur)
		case inBlock:
			cur = append(cur, line)
		}
	}
	return blocks
}

// TestUndoKeyRotationStepsOfDay2Work runs the synchook commands of docs/day2.md's "Rotate the
// key" blocks (the key file's, and the Secret's between its kubectl get and apply) with the
// arguments the doc shows, each block in a directory of its own (a block whose first command
// rotates starts from a ring of one key, 0644 as a shell redirect leaves it): every rotation
// keeps the keys before it (a seal made before it still opens), adds one that seals, and
// leaves the file 0600. And no command block of the README or docs/ redirects undo-key's
// output into a file.
func TestUndoKeyRotationStepsOfDay2Work(t *testing.T) {
	blocks := docCommandBlocks(t, "../docs/day2.md", "Rotate the key")
	if len(blocks) < 2 {
		t.Fatalf("docs/day2.md's \"Rotate the key\" has %d sh blocks, want the key file's and the Secret's", len(blocks))
	}
	for i, block := range blocks {
		t.Run(fmt.Sprintf("block %d of the section rotates in place and keeps the old key", i+1), func(t *testing.T) {
			dir := t.TempDir()
			var ring *undo.Ring
			rotations := 0
			for _, line := range block {
				line, _, _ = strings.Cut(line, "#")
				args := strings.Fields(line)
				if len(args) == 0 || args[0] != "synchook" {
					continue
				}
				if len(args) < 2 || args[1] != "undo-key" {
					t.Fatalf("a synchook command other than undo-key in a rotation block: %q", line)
				}
				for j := 2; j+1 < len(args); j++ {
					switch args[j] {
					case "--rotate", "-o", "--output":
						args[j+1] = filepath.Join(dir, args[j+1])
					}
				}
				rotate := slices.Contains(args, "--rotate")
				if rotate && ring == nil { // the ring the block starts from (a Secret's, a file's)
					_, ring = newKeyFile(t, dir, "keys", 0o644)
				}
				var id undo.Identity
				var sealed string
				if ring != nil {
					id, sealed = sealWith(t, ring)
				}
				if code, out, errOut := runCLI(t, args[1:]...); code != exitOK || out != "" || errOut != "" {
					t.Fatalf("%s: exit %d, stdout %d bytes, stderr %q", line, code, len(out), errOut)
				}
				path := filepath.Join(dir, "keys")
				info, err := os.Stat(path)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				if perm := info.Mode().Perm(); perm != 0o600 {
					t.Fatalf("%s: keys has mode %04o, want 0600", line, perm)
				}
				next := parseKeyFile(t, path)
				if rotate {
					rotations++
					if n := len(ring.IDs()); len(next.IDs()) != n+1 || !next.Contains(ring) {
						t.Fatalf("%s: ring %v after a rotation of %v", line, next.IDs(), ring.IDs())
					}
					if _, _, err := next.Open(id, undo.Physical, sealed); err != nil {
						t.Errorf("%s: a seal made before the rotation does not open: %v", line, err)
					}
					_, resealed := sealWith(t, next)
					if _, keyID, err := next.Open(id, undo.Physical, resealed); err != nil || keyID != next.IDs()[len(next.IDs())-1] {
						t.Errorf("%s: the new key does not seal (opened by %q, %v)", line, keyID, err)
					}
				}
				ring = next
			}
			if rotations == 0 {
				t.Errorf("the block has no `synchook undo-key --rotate` command: %q", block)
			}
		})
	}

	t.Run("no command block of the README or docs redirects undo-key's output", func(t *testing.T) {
		files, _ := filepath.Glob("../docs/*.md")
		for _, file := range append(files, "../README.md") {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for n, line := range strings.Split(string(data), "\n") {
				cmd, _, _ := strings.Cut(strings.TrimSpace(line), "#")
				if (strings.HasPrefix(cmd, "synchook undo-key") || strings.HasPrefix(cmd, "go run . undo-key")) && strings.Contains(cmd, ">") {
					t.Errorf("%s:%d redirects undo-key's output (use -o FILE): %s", file, n+1, line)
				}
			}
		}
	})
}
