package undokey

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/synchook/synchook/internal/ownfs"

	"github.com/synchook/synchook/internal/undo"
)

// LocalFileName is the name of the key ring file LocalFile keeps in its directory.
const LocalFileName = "undo.keys"

// LocalFile returns the key ring of the file LocalFileName in dir, creating it (mode 0600,
// a new ring) when it does not exist yet; created says it did. It is the key of a single
// local process (synchook serve outside a cluster, beside its certificates): a later start
// with the same dir reuses the ring, so that what one start sealed the next one opens.
//
// dir is created (mode 0700) when missing. It must be a directory, not a symbolic link,
// owned by the process's user and not writable by group or others: whoever else can write
// it could plant a key of their own and forge undos. Otherwise, and when the file cannot be
// created there, LocalFile fails with an error that names dir and says to give a key file
// (--undo-key-file). Several processes starting at once end with the same ring: the file
// appears whole (a hard link of a finished temporary file) and the first link wins. Errors
// never hold a secret.
func LocalFile(dir string) (ring *undo.Ring, created bool, err error) {
	const fix = "give --undo-key-file (synchook undo-key prints a new ring)"
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, false, fmt.Errorf("undo key: create %s: %w; %s", dir, err, fix)
		}
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return nil, false, fmt.Errorf("undo key: %w; %s", err, fix)
	}
	me := os.Getuid()
	uid, known := ownfs.Owner(info)
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return nil, false, fmt.Errorf("undo key: %s is a symbolic link, which whoever owns it can point elsewhere: not a place for a key; %s", dir, fix)
	case !info.IsDir():
		return nil, false, fmt.Errorf("undo key: %s is not a directory (mode %s); %s", dir, info.Mode(), fix)
	case known && me >= 0 && uid != me:
		return nil, false, fmt.Errorf("undo key: directory %s is owned by uid %d, not by this user (uid %d): not a place for a key; %s", dir, uid, me, fix)
	case info.Mode().Perm()&0o022 != 0:
		return nil, false, fmt.Errorf("undo key: directory %s has mode %04o: group or others may write it, so not a place for a key; %s", dir, info.Mode().Perm(), fix)
	}
	path := filepath.Join(dir, LocalFileName)
	if ring, err := loadOwn(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return ring, false, err
	}

	ring, err = undo.GenerateRing()
	if err != nil {
		return nil, false, fmt.Errorf("undo key: %w", err)
	}
	text, err := ring.MarshalText()
	if err != nil {
		return nil, false, fmt.Errorf("undo key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+LocalFileName+"-*") // mode 0600
	if err != nil {
		return nil, false, fmt.Errorf("undo key: cannot create a key file in %s: %w; %s", dir, err, fix)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(text)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("undo key: write a key file in %s: %w", dir, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process's start won: its ring it is
			ring, err := loadOwn(path)
			return ring, false, err
		}
		return nil, false, fmt.Errorf("undo key: create %s: %w; %s", path, err, fix)
	}
	return ring, true, nil
}

// loadOwn is LoadFile for a file that must also belong to this process's user; a missing
// file's error wraps fs.ErrNotExist.
func loadOwn(path string) (*undo.Ring, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("undo key file: %w", err)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("undo key file %s: a symbolic link in synchook's own directory; remove it (a new key is made) or give --undo-key-file", path)
	}
	if uid, known := ownfs.Owner(info); known && os.Getuid() >= 0 && uid != os.Getuid() {
		return nil, fmt.Errorf("undo key file %s: owned by uid %d, not by this user (uid %d); give --undo-key-file", path, uid, os.Getuid())
	}
	return LoadFile(path)
}
