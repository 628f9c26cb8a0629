//go:build unix

package ownfs

import (
	"io/fs"
	"syscall"
)

// Owner returns the uid that owns the file of info (from os.Lstat or os.Stat); known is
// false where the system does not say.
func Owner(info fs.FileInfo) (uid int, known bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
