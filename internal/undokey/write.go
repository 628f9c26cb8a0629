package undokey

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/synchook/synchook/internal/undo"
)

// WriteFile replaces the file at path with ring in the key ring text format, mode 0600: it
// writes a temporary file in path's directory, syncs it and renames it over path, so that path
// holds the old ring or the new one, never a part, and a failure leaves it as it was (the
// temporary file removed). A file that existed with another mode ends 0600; a symbolic link
// at path is replaced by the file. The directory must exist. Errors name path, never a secret.
func WriteFile(path string, ring *undo.Ring) (err error) {
	text, err := ring.MarshalText()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if info, serr := os.Stat(path); serr == nil && info.IsDir() {
		return fmt.Errorf("write %s: it is a directory", path)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // mode 0600
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("write %s: the directory %s does not exist", path, dir)
		}
		return fmt.Errorf("write %s: cannot create a file in %s: %w", path, dir, cause(err))
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err == nil {
		if _, err = f.Write(text); err == nil {
			if err = f.Sync(); err == nil {
				err = f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, cause(err))
	}
	// The rename on disk too (best effort: not every filesystem syncs a directory).
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// cause is the error inside a *fs.PathError or *os.LinkError (their messages name the
// temporary file), else err.
func cause(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}
