//go:build !unix

package capture

import (
	"fmt"
	"io/fs"
	"os"
)

// openNoFollow opens path for reading, failing when it is a symbolic link (checked first:
// this system has no O_NOFOLLOW).
func openNoFollow(path string) (*os.File, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: a symbolic link", path)
	}
	return os.Open(path)
}
