package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/capture"
)

// replay refuses a capture directory that others can write, and skips, each with one line
// naming the file and why, records planted as a symbolic link or by another user, replaying
// the rest.
func TestReplaySkipsPlantedRecordsAndRefusesAnOpenDirectory(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string) // after the capture
		code    int
		stderr  []string
		equal   int
	}{
		{"a symbolic link and another user's record are skipped and the rest replayed", func(t *testing.T, dir string) {
			files, err := capture.Files(dir)
			if err != nil || len(files) == 0 {
				t.Fatalf("capture files: %v, %v", files, err)
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(t.TempDir(), "outside.json")
			if err := os.WriteFile(outside, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "planted-link.json")); err != nil {
				t.Fatal(err)
			}
			theirs := filepath.Join(dir, "planted-by-nobody.json")
			if err := os.WriteFile(theirs, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(theirs, 65534, 65534); err != nil {
				t.Skipf("cannot simulate another user's file: chown to uid 65534: %v (run the tests as root to cover this case)", err)
			}
		}, exitFailed, []string{
			"skipped planted-link.json: a symbolic link",
			fmt.Sprintf("skipped planted-by-nobody.json: owned by uid 65534, not by this user (uid %d)", os.Getuid()),
		}, 5},
		{"a directory writable by everyone is refused", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, exitUsage, []string{"is writable by group and others", "drwxrwxrwx", "chmod go-w"}, 0},
		{"a symbolic link to the directory is refused", nil, exitUsage, []string{"is a symbolic link"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			dir := filepath.Join(tmp, "capture")
			config := teamConfig(t, tmp, "a")
			key := captureTraffic(t, config, dir)
			if c.prepare != nil {
				c.prepare(t, dir)
			} else {
				link := filepath.Join(tmp, "link")
				if err := os.Symlink(dir, link); err != nil {
					t.Fatal(err)
				}
				dir = link
			}
			code, out, errOut := runCLI(t, "replay", dir, "--config", config, "--undo-key-file", key)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, c.code, out, errOut)
			}
			for _, want := range c.stderr {
				if strings.Count(errOut, want) != 1 {
					t.Errorf("stderr does not say %q once:\n%s", want, errOut)
				}
			}
			if n := len(regexp.MustCompile(`(?m)^equal `).FindAllString(out, -1)); n != c.equal {
				t.Errorf("%d requests equal, want %d:\n%s", n, c.equal, out)
			}
			if strings.Contains(out, "planted") {
				t.Errorf("a planted file was replayed:\n%s", out)
			}
		})
	}
}
