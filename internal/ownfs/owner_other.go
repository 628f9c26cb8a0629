//go:build !unix

package ownfs

import "io/fs"

// Owner returns the uid that owns the file of info; this system does not say (known is
// false), so callers check only the mode and symbolic links.
func Owner(fs.FileInfo) (uid int, known bool) { return 0, false }
