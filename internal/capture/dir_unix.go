//go:build unix

package capture

import (
	"os"
	"syscall"
)

// openNoFollow opens path for reading, failing when its last element is a symbolic link.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
