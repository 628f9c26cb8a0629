package capture

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/synchook/synchook/internal/ownfs"
)

// A capture directory holds what synchook saw of real traffic and what replay feeds to the
// hooks, so only the user synchook runs as may write it: anyone else who can could plant
// records that replay runs, or swap the directory for a link to somewhere else. The checks
// below use os.Lstat, which does not follow a symbolic link, and the owner from the file
// system (fileOwner).

// prepareDir makes dir ready for a Writer: it creates it (mode 0700, parents too) when
// missing, then refuses, with an error naming the directory, its mode, its owner and what to
// do, a directory that is a symbolic link, is writable by group or others, or is owned by
// another user than the process's.
func prepareDir(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("capture: %w", err)
		}
	}
	return checkDir(dir, true)
}

// checkDir refuses dir when it is not a directory, is a symbolic link, is writable by group
// or others, or (ownedByUs) is owned by another user than the process's.
func checkDir(dir string, ownedByUs bool) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	uid, known := ownfs.Owner(info)
	owner := "owner unknown"
	if known {
		owner = fmt.Sprintf("owner uid %d", uid)
	}
	me := os.Getuid()
	fix := fmt.Sprintf("use a directory that only this user (uid %d) can write, or a path that does not exist yet (synchook creates it 0700)", me)
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dir)
		return fmt.Errorf("capture: directory %s is a symbolic link (to %q), which whoever owns it can point elsewhere: give the real directory instead, or %s", dir, target, fix)
	case !info.IsDir():
		return fmt.Errorf("capture: %s is not a directory (mode %s, %s)", dir, info.Mode(), owner)
	case info.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("capture: directory %s is writable by %s (mode %s, %s), who could plant or replace capture files: chmod go-w %s, or %s",
			dir, writers(info.Mode()), info.Mode(), owner, dir, fix)
	case ownedByUs && known && me >= 0 && uid != me:
		return fmt.Errorf("capture: directory %s is owned by uid %d, not by this user (uid %d) (mode %s), who could plant or replace capture files: chown it to uid %d, or %s",
			dir, uid, me, info.Mode(), me, fix)
	}
	return nil
}

// writers names who besides the owner may write a file of mode m.
func writers(m fs.FileMode) string {
	switch m.Perm() & 0o022 {
	case 0o022:
		return "group and others"
	case 0o020:
		return "its group"
	default:
		return "others"
	}
}

// Skipped is a file of a capture directory that ReplayFiles leaves out, and why.
type Skipped struct {
	// Path is the file's path.
	Path string
	// Reason says why, e.g. "a symbolic link" or "owned by uid 1000, not by this user (uid 0)".
	Reason string
}

// ReplayFiles returns the capture files of dir that replay may run (those of Files that are
// regular files owned by the current user) and the ones it skips, each with its reason:
// symbolic links and files of other users, which someone else could have planted. It refuses
// a dir that is a symbolic link or is writable by group or others, naming its mode and owner.
func ReplayFiles(dir string) (files []string, skipped []Skipped, err error) {
	if err := checkDir(dir, false); err != nil {
		return nil, nil, err
	}
	all, err := Files(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, path := range all {
		info, err := os.Lstat(path)
		if err != nil {
			skipped = append(skipped, Skipped{path, err.Error()})
			continue
		}
		if reason := notOwnFile(info); reason != "" {
			skipped = append(skipped, Skipped{path, reason})
			continue
		}
		files = append(files, path)
	}
	return files, skipped, nil
}

// notOwnFile says why info is not a regular file of the current user, or returns "".
func notOwnFile(info fs.FileInfo) string {
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return "a symbolic link"
	case !info.Mode().IsRegular():
		return fmt.Sprintf("not a regular file (mode %s)", info.Mode())
	}
	if uid, known := ownfs.Owner(info); known && os.Getuid() >= 0 && uid != os.Getuid() {
		return fmt.Sprintf("owned by uid %d, not by this user (uid %d)", uid, os.Getuid())
	}
	return ""
}

// ReadOwnFile is ReadFile for replay: it opens path without following a symbolic link and
// checks that what it opened is a regular file owned by the current user, so a file swapped
// for a link or another user's file after ReplayFiles listed it is refused too.
func ReadOwnFile(path string) (*Record, error) {
	b, _, reason, err := readOwn(path)
	if err != nil {
		return nil, err
	}
	if reason != "" {
		return nil, fmt.Errorf("%s: %s", filepath.Base(path), reason)
	}
	return ParseRecord(b)
}

// readOwn reads the file at path, opened without following a symbolic link, when what it
// opened is a regular file owned by the current user; else reason says why not (no error).
func readOwn(path string) (b []byte, info fs.FileInfo, reason string, err error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, nil, "", err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, nil, "", err
	}
	if reason := notOwnFile(info); reason != "" {
		return nil, info, reason, nil
	}
	if b, err = io.ReadAll(f); err != nil {
		return nil, nil, "", err
	}
	return b, info, "", nil
}
