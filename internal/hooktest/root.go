package hooktest

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// fileRoot is the directory `synchook test` reads in (Options.Root; default the working
// directory): every file it reads (the test files, and the objects, configs, policyFiles and
// values files they name) is read through an os.Root on it, so that a name that leaves it, by
// ".." or an absolute path or by a symbolic link, is refused before anything of the file is
// read (ErrOutside).
type fileRoot struct {
	root *os.Root
	// dir is the root's absolute path; name is as given, for messages.
	dir, name string
}

// ErrOutside is wrapped by the error of a file outside the root (exit code 2, as ErrInvalid).
var ErrOutside = errors.New("outside the root")

// openRoot opens dir (default ".") as the root.
func openRoot(dir string) (*fileRoot, error) {
	dir = cmp.Or(dir, ".")
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("--root: %w", err)
	}
	return &fileRoot{root: root, dir: abs, name: dir}, nil
}

func (r *fileRoot) Close() error { return r.root.Close() }

// outside is the error of path, outside the root.
func (r *fileRoot) outside(path, how string) error {
	return fmt.Errorf("%s: %w %s%s (synchook test reads only files inside the directory it runs in, or --root DIR)", path, ErrOutside, r.dir, how)
}

// rel returns path (relative to the working directory, or absolute) relative to the root, or
// an error naming path when it is not inside the root.
func (r *fileRoot) rel(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(r.dir, abs)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", r.outside(path, "")
	}
	return rel, nil
}

// escaped reports whether err is os.Root's refusal of a name that leaves it by a symbolic
// link (os has no exported error for it: "path escapes from parent").
func escaped(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// ReadFile reads the file at path (relative to the working directory, or absolute) through
// the root: config.Reader's ReadFile, and every read of a file a test file names.
func (r *fileRoot) ReadFile(path string) ([]byte, error) {
	rel, err := r.rel(path)
	if err != nil {
		return nil, err
	}
	data, err := r.root.ReadFile(rel)
	if escaped(err) {
		return nil, r.outside(path, ", by a symbolic link")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	return data, nil
}

// unwrapPath returns the cause of a *fs.PathError (whose text names the root-relative path,
// which the caller names as the user gave it).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// find returns the test files below each of paths (a file is taken as it is; a directory is
// searched recursively for FileName and *.FileName, through the root, not following
// symbolic links to directories), sorted. A path outside the root is an error naming it.
func (r *fileRoot) find(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		rel, err := r.rel(p)
		if err != nil {
			return nil, err
		}
		st, err := r.root.Stat(rel)
		if escaped(err) {
			return nil, r.outside(p, ", by a symbolic link")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, unwrapPath(err))
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		err = fs.WalkDir(r.root.FS(), filepath.ToSlash(rel), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (d.Name() == FileName || strings.HasSuffix(d.Name(), "."+FileName)) {
				below, err := filepath.Rel(rel, filepath.FromSlash(path))
				if err != nil {
					return err
				}
				out = append(out, filepath.Join(p, below))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
