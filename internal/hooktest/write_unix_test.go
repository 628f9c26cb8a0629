//go:build unix

package hooktest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeInside writes regular files only: a directory or a fifo (which a read of the expectation
// would not get past, so not reachable through a test file) is refused without blocking.
func TestWriteInsideRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Skipf("no fifo here: %v", err)
	}
	for _, name := range []string{"sub", "fifo", "missing.yaml"} {
		err := writeInside(dir, name, []byte("a: b\n"))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(err) {
		t.Errorf("missing.yaml was created (%v)", err)
	}
}
