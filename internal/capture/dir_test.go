package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
)

// otherUID is the user that files "of another user" belong to: nobody.
const otherUID = 65534

// chownToOther gives path to otherUID, or skips the test when this process may not (only root
// may give a file away).
func chownToOther(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, otherUID, otherUID); err != nil {
		t.Skipf("cannot simulate a file of another user: chown %s to uid %d: %v (run the tests as root to cover this case)", path, otherUID, err)
	}
}

func mkdir(t *testing.T, path string, mode fs.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

// The writer refuses, naming the directory, its mode, its owner and what to do, every capture
// directory that someone else than this user could write or re-point.
func TestTheWriterRefusesADirectoryOthersCanWrite(t *testing.T) {
	cases := []struct {
		name string
		dir  func(t *testing.T, tmp string) string
		want []string // in the error
	}{
		{"a directory writable by everyone (0777) is refused", func(t *testing.T, tmp string) string {
			return mkdir(t, filepath.Join(tmp, "open"), 0o777)
		}, []string{"writable by group and others", "drwxrwxrwx", "owner uid", "chmod go-w"}},
		{"a directory writable by its group (0770) is refused", func(t *testing.T, tmp string) string {
			return mkdir(t, filepath.Join(tmp, "group"), 0o770)
		}, []string{"writable by its group", "drwxrwx---", "chmod go-w"}},
		{"a sticky world-writable directory like /tmp (1777) is refused", func(t *testing.T, tmp string) string {
			dir := mkdir(t, filepath.Join(tmp, "sticky"), 0o777)
			if err := os.Chmod(dir, 0o777|fs.ModeSticky); err != nil {
				t.Fatal(err)
			}
			return dir
		}, []string{"writable by group and others"}},
		{"a symbolic link to a private directory is refused", func(t *testing.T, tmp string) string {
			real := mkdir(t, filepath.Join(tmp, "real"), 0o700)
			link := filepath.Join(tmp, "link")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, []string{"is a symbolic link", "real"}},
		{"a private directory owned by another user is refused", func(t *testing.T, tmp string) string {
			dir := mkdir(t, filepath.Join(tmp, "theirs"), 0o700)
			chownToOther(t, dir)
			return dir
		}, []string{fmt.Sprintf("owned by uid %d", otherUID), fmt.Sprintf("not by this user (uid %d)", os.Getuid()), "chown"}},
		{"a file in place of the directory is refused", func(t *testing.T, tmp string) string {
			path := filepath.Join(tmp, "file")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}, []string{"not a directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t, t.TempDir())
			w, err := New(Options{Dir: dir})
			if err == nil {
				w.Close()
				t.Fatalf("New accepted %s", dir)
			}
			for _, want := range append(c.want, dir) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestTheWriterAcceptsAPrivateDirectoryAndCreatesAMissingOne0700(t *testing.T) {
	cases := []struct {
		name string
		dir  func(t *testing.T, tmp string) string
	}{
		{"a missing directory is created 0700, parents too", func(t *testing.T, tmp string) string {
			return filepath.Join(tmp, "new", "capture")
		}},
		{"an existing 0700 directory of this user is used", func(t *testing.T, tmp string) string {
			return mkdir(t, filepath.Join(tmp, "mine"), 0o700)
		}},
		{"an existing 0755 directory of this user is used: others may read, not write", func(t *testing.T, tmp string) string {
			return mkdir(t, filepath.Join(tmp, "readable"), 0o755)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t, t.TempDir())
			before, statErr := os.Stat(dir)
			w, err := New(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			info, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if errors.Is(statErr, fs.ErrNotExist) && info.Mode().Perm() != 0o700 {
				t.Errorf("created with mode %s, want 0700", info.Mode())
			}
			if statErr == nil && info.Mode() != before.Mode() {
				t.Errorf("mode changed from %s to %s", before.Mode(), info.Mode())
			}
		})
	}
}

// replayDir writes three capture records, as serve --capture does, into a new directory.
func replayDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "capture")
	reg := newRegistry(t, labelHook("team", "team", "a"))
	w := newWriter(t, Options{Dir: dir, Registry: reg})
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	for i := range 3 {
		mutate(t, r, podGVK, hooks.CreatePhysical, fixtures.JSON(fixtures.Pod("default", fmt.Sprint("web-", i))))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A record planted by someone else, as a symbolic link or as another user's file, is skipped
// with its reason, and the rest is replayed.
func TestReplaySkipsLinksAndFilesOfOtherUsers(t *testing.T) {
	cases := []struct {
		name   string
		plant  func(t *testing.T, dir, record string) string // returns the planted file's path
		reason string
	}{
		{"a symbolic link to a record outside the directory is skipped", func(t *testing.T, dir, record string) string {
			outside := filepath.Join(t.TempDir(), "outside.json")
			b, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(outside, b, 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "99991231T000000.000000000Z-000001.json")
			if err := os.Symlink(outside, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "a symbolic link"},
		{"a record owned by another user is skipped", func(t *testing.T, dir, record string) string {
			b, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			planted := filepath.Join(dir, "99991231T000000.000000000Z-000002.json")
			if err := os.WriteFile(planted, b, 0o600); err != nil {
				t.Fatal(err)
			}
			chownToOther(t, planted)
			return planted
		}, fmt.Sprintf("owned by uid %d, not by this user (uid %d)", otherUID, os.Getuid())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := replayDir(t)
			own, err := Files(dir)
			if err != nil || len(own) != 3 {
				t.Fatalf("capture files: %v, %v", own, err)
			}
			planted := c.plant(t, dir, own[0])

			files, skipped, err := ReplayFiles(dir)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(files, ",") != strings.Join(own, ",") {
				t.Errorf("replayed %v, want the three own records %v", files, own)
			}
			if len(skipped) != 1 || skipped[0].Path != planted || skipped[0].Reason != c.reason {
				t.Errorf("skipped %+v, want %s as %q", skipped, planted, c.reason)
			}
			if _, err := ReadOwnFile(planted); err == nil {
				t.Errorf("ReadOwnFile read the planted %s", planted)
			}
			for _, f := range files {
				if _, err := ReadOwnFile(f); err != nil {
					t.Errorf("ReadOwnFile(%s): %v", f, err)
				}
			}
		})
	}
}

func TestReplayRefusesADirectoryOthersCanWriteOrALink(t *testing.T) {
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		{"a directory writable by everyone (0777) is refused", func(t *testing.T) string {
			dir := replayDir(t)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "writable by group and others"},
		{"a directory writable by its group (0770) is refused", func(t *testing.T) string {
			dir := replayDir(t)
			if err := os.Chmod(dir, 0o770); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "writable by its group"},
		{"a symbolic link to a capture directory is refused", func(t *testing.T) string {
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(replayDir(t), link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is a symbolic link"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t)
			files, _, err := ReplayFiles(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("ReplayFiles(%s) = %v, %v; want an error naming the directory and saying %q", dir, files, err, c.want)
			}
		})
	}
}
