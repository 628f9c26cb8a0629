package plugin

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// extract writes the members of the tar stream b below dir as `tar -xf` does (each with the
// mode of its header), refusing a name that leaves dir.
func extract(t *testing.T, b []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("not a tar stream: %v", err)
		}
		path := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			t.Fatalf("member %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.Mkdir(path, os.FileMode(h.Mode))
		case tar.TypeReg:
			var body []byte
			if body, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, body, os.FileMode(h.Mode))
			}
		default:
			t.Fatalf("member %q of type %q", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// `synchook capture export DIR` writes what a container without tar can hand over on stdout;
// extracted, it replays as the directory itself does.
func TestCaptureExportReplaysAsTheDirectory(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "capture")
	config := teamConfig(t, tmp, "a")
	key := captureTraffic(t, config, dir)

	code, stream, errOut := runCLI(t, "capture", "export", dir)
	if code != exitOK || errOut != "" {
		t.Fatalf("capture export: exit %d, stderr %q", code, errOut)
	}
	local := filepath.Join(tmp, "local")
	if err := os.Mkdir(local, 0o700); err != nil {
		t.Fatal(err)
	}
	extract(t, []byte(stream), local)
	if info, err := os.Stat(filepath.Join(local, "capture")); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("the stream does not make ./capture 0700: %v, %v", info, err)
	}

	code, out, errOut := runCLI(t, "replay", filepath.Join(local, "capture"), "--config", config, "--undo-key-file", key)
	if code != exitOK || !strings.Contains(out, "5 requests: 5 equal, 0 different, 0 failed") {
		t.Errorf("replay of the export: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(stream, "replay-canary-4711") {
		t.Error("the export holds the captured Secret's value")
	}
}

func TestCaptureExportBadInput(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand is bad usage", []string{"capture"}, exitUsage, "want `capture export DIR`"},
		{"an unknown subcommand is bad usage", []string{"capture", "import", tmp}, exitUsage, "want `capture export DIR`"},
		{"a missing directory is named", []string{"capture", "export", filepath.Join(tmp, "nope")}, exitUsage, "nope: no such file or directory"},
		{"a file is not a directory", []string{"capture", "export", file}, exitUsage, "is not a directory"},
		{"a directory others can write is refused", []string{"capture", "export", mkdirMode(t, filepath.Join(tmp, "open"), 0o777)}, exitUsage, "writable by group and others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("exit %d, stdout %d bytes, stderr %q; want %d and %q", code, len(out), errOut, tc.code, tc.want)
			}
		})
	}
}

func mkdirMode(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}
