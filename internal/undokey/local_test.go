package undokey_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
)

// TestLoadFileRefusesAFileOthersMayWrite: whoever may write the key file can forge undos. The
// mode checked is the one of the file a symbolic link chain ends at (a mounted Secret's item
// is ..data/keys behind two links).
func TestLoadFileRefusesAFileOthersMayWrite(t *testing.T) {
	ring := newRing(t)
	secret := secretsOf(t, ring)[0]
	cases := []struct {
		name    string
		mode    os.FileMode
		link    bool
		wantErr string // "": accepted
	}{
		{name: "0600 is accepted", mode: 0o600},
		{name: "0644 is accepted", mode: 0o644},
		{name: "0400 is accepted", mode: 0o400},
		{name: "0666 is refused", mode: 0o666, wantErr: "mode 0666 lets group or others write it; want 0600 or 0644"},
		{name: "0620 is refused", mode: 0o620, wantErr: "mode 0620 lets group or others write it"},
		{name: "0602 is refused", mode: 0o602, wantErr: "mode 0602"},
		{name: "a link to a 0644 file is accepted", mode: 0o644, link: true},
		{name: "a link to a 0666 file is refused", mode: 0o666, link: true, wantErr: "mode 0666"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "..data", "keys")
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, ringText(t, ring), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, tc.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			path := target
			if tc.link { // keys -> ..data/keys, as kubelet mounts a Secret's item
				path = filepath.Join(dir, "keys")
				if err := os.Symlink(filepath.Join("..data", "keys"), path); err != nil {
					t.Fatal(err)
				}
			}
			got, err := undokey.LoadFile(path)
			if tc.wantErr == "" {
				if err != nil || !got.Contains(ring) {
					t.Fatalf("LoadFile = %v, %v; want the ring", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("LoadFile error %v; want one naming %s and %q", err, path, tc.wantErr)
			}
			checkNoSecret(t, "the error", err.Error(), []string{secret})
		})
	}
}

func TestLocalFileIsCreatedOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs") // missing: created 0700
	first, created, err := undokey.LocalFile(dir)
	if err != nil || !created || first == nil {
		t.Fatalf("first LocalFile = %v, created %v, %v", first, created, err)
	}
	path := filepath.Join(dir, undokey.LocalFileName)
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		info, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s has mode %04o, want %04o", p, got, want)
		}
	}
	again, created, err := undokey.LocalFile(dir)
	if err != nil || created || !again.Contains(first) || !first.Contains(again) {
		t.Fatalf("second LocalFile = %v, created %v, %v; want the first ring %v reused", again, created, err, first)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only %s", len(entries), undokey.LocalFileName)
	}
}

func TestLocalFilesStartedAtOnceEndWithTheSameRing(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	rings := make([]*undo.Ring, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rings[i], _, errs[i] = undokey.LocalFile(dir)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !rings[i].Contains(rings[0]) || !rings[0].Contains(rings[i]) {
			t.Errorf("start %d: %v, %v; want the ring %v", i, rings[i], errs[i], rings[0])
		}
	}
}

func TestLocalFileRefusesADirectoryThatIsNotSynchooksOwn(t *testing.T) {
	cases := []struct {
		name    string
		make    func(t *testing.T) string
		wantErr string
	}{
		{"a directory group may write", func(t *testing.T) string { return chmodDir(t, 0o770) }, "mode 0770"},
		{"a directory anyone may write", func(t *testing.T) string { return chmodDir(t, 0o777) }, "mode 0777"},
		{"a symbolic link to a directory", func(t *testing.T) string {
			link := filepath.Join(t.TempDir(), "certs")
			if err := os.Symlink(t.TempDir(), link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "symbolic link"},
		{"a read-only directory without a key file", func(t *testing.T) string {
			if os.Getuid() == 0 {
				t.Skip("root writes a read-only directory")
			}
			return chmodDir(t, 0o500)
		}, "cannot create a key file"},
		{"a directory of another user", func(t *testing.T) string {
			if os.Getuid() != 0 {
				return "/" // root's
			}
			dir := t.TempDir()
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "owned by uid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.make(t)
			ring, _, err := undokey.LocalFile(dir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--undo-key-file") {
				t.Fatalf("LocalFile(%s) = %v, %v; want an error with %q telling to give --undo-key-file", dir, ring, err, tc.wantErr)
			}
			if _, err := os.Lstat(filepath.Join(dir, undokey.LocalFileName)); err == nil {
				t.Errorf("a key file was written in %s", dir)
			}
		})
	}
}

// chmodDir returns a new directory with mode (set past the umask); it is made 0700 again
// when the test ends, for t.TempDir's removal.
func chmodDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	return dir
}
