//go:build unix

package capture

import (
	"io/fs"
	"os"
	"syscall"
)

// fileOwner returns the uid that owns the file of info; known is false where the system does
// not say.
func fileOwner(info fs.FileInfo) (uid int, known bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// openNoFollow opens path for reading, failing when its last element is a symbolic link.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
