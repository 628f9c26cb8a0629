package capture

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// entry is one member of a tar stream.
type entry struct {
	name string
	mode int64
	typ  byte
	body []byte
}

// untar reads every member of the tar stream b.
func untar(t *testing.T, b []byte) []entry {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	var out []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("not a tar stream: %v", err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || len(h.PAXRecords) > 0 || len(h.Xattrs) > 0 { //nolint:staticcheck // Xattrs: nothing may be added
			t.Errorf("%s carries owner or extended metadata: %+v", h.Name, h)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{h.Name, h.Mode, h.Typeflag, body})
	}
}

// Export writes the directory entry and each own capture file, its bytes as on disk, in
// capture order; files someone else could have planted are left out with their reason, as
// replay skips them.
func TestExportWritesTheOwnCaptureFilesAsOneTarStream(t *testing.T) {
	cases := []struct {
		name   string
		plant  func(t *testing.T, dir, record string) string // "": nothing planted
		reason string
	}{
		{"a capture directory exports every file", func(*testing.T, string, string) string { return "" }, ""},
		{"a symbolic link to a file outside the directory is left out", func(t *testing.T, dir, _ string) string {
			outside := filepath.Join(t.TempDir(), "secret.json")
			if err := os.WriteFile(outside, []byte(`{"not":"a capture"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "99991231T000000.000000000Z-000001.json")
			if err := os.Symlink(outside, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "a symbolic link"},
		{"a file of another user is left out", func(t *testing.T, dir, record string) string {
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
		{"a subdirectory and a temporary file are not capture files", func(t *testing.T, dir, _ string) string {
			mkdir(t, filepath.Join(dir, "sub.json"), 0o700)
			if err := os.WriteFile(filepath.Join(dir, ".tmp-1.json"), []byte("partial"), 0o600); err != nil {
				t.Fatal(err)
			}
			return ""
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := replayDir(t)
			own, err := Files(dir)
			if err != nil || len(own) != 3 {
				t.Fatalf("capture files: %v, %v", own, err)
			}
			planted := c.plant(t, dir, own[0])

			var buf bytes.Buffer
			skipped, err := Export(dir, &buf)
			if err != nil {
				t.Fatal(err)
			}
			got := untar(t, buf.Bytes())
			want := []entry{{ExportDir + "/", 0o700, tar.TypeDir, []byte{}}}
			for _, f := range own {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, entry{ExportDir + "/" + filepath.Base(f), 0o600, tar.TypeReg, b})
			}
			if !slices.EqualFunc(got, want, func(a, b entry) bool {
				return a.name == b.name && a.mode == b.mode && a.typ == b.typ && bytes.Equal(a.body, b.body)
			}) {
				t.Errorf("exported %d members %v,\nwant the directory and the 3 own files as on disk %v", len(got), names(got), names(want))
			}
			switch {
			case planted == "" && len(skipped) != 0:
				t.Errorf("left out %+v, want none", skipped)
			case planted != "" && (len(skipped) != 1 || skipped[0].Path != planted || skipped[0].Reason != c.reason):
				t.Errorf("left out %+v, want %s as %q", skipped, planted, c.reason)
			}
		})
	}
}

func names(es []entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.name
	}
	return out
}

// Export refuses, as replay does, a directory that someone else could write or re-point, and
// writes nothing then.
func TestExportRefusesADirectoryOthersCanWriteOrALink(t *testing.T) {
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
		{"a symbolic link to a capture directory is refused", func(t *testing.T) string {
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(replayDir(t), link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is a symbolic link"},
		{"a missing directory is refused", func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "nope")
		}, "no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t)
			var buf bytes.Buffer
			_, err := Export(dir, &buf)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("Export(%s) = %v; want an error naming the directory and saying %q", dir, err, c.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes for a refused directory", buf.Len())
			}
		})
	}
}
