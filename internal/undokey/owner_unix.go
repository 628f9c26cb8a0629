//go:build unix

package undokey

import (
	"io/fs"
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
