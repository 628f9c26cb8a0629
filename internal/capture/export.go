package capture

import (
	"archive/tar"
	"fmt"
	"io"
	"path/filepath"
)

// ExportDir is the directory the entries of an Export stream are in: `tar -xf` of the stream
// makes ./capture (mode 0700) with the capture files in it (mode 0600), ready for replay.
const ExportDir = "capture"

// Export writes the capture files of dir to w as one tar stream, for a container without tar
// (`kubectl exec … -- synchook capture export DIR > capture.tar`): a directory entry ExportDir
// (mode 0700), then each file as ExportDir/<its name> (mode 0600, its modification time), its
// bytes as they are on disk, in name order (= capture order). It adds nothing: no owner, no
// other metadata; the Secret values in the files are already HMACs. The same confinement as
// replay (ReplayFiles): a dir that is a symbolic link or writable by group or others is
// refused, symbolic links, files that are not regular and files of other users are left out
// (returned with their reason), and each file is opened without following a link and checked
// again on what was opened (one deleted or swapped since it was listed is left out too). An
// error of w leaves it with a cut stream.
func Export(dir string, w io.Writer) (skipped []Skipped, err error) {
	files, skipped, err := ReplayFiles(dir)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir, Name: ExportDir + "/", Mode: 0o700, Format: tar.FormatUSTAR,
	}); err != nil {
		return nil, fmt.Errorf("capture export: %w", err)
	}
	for _, path := range files {
		b, info, reason, err := readOwn(path)
		if err != nil {
			// deleted since ReplayFiles listed it (the Writer's size bound), or swapped for
			// a link (O_NOFOLLOW): the stream stays whole without it
			reason = err.Error()
		}
		if reason != "" {
			skipped = append(skipped, Skipped{path, reason})
			continue
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: ExportDir + "/" + filepath.Base(path), Mode: 0o600,
			Size: int64(len(b)), ModTime: info.ModTime().UTC().Truncate(1e9), Format: tar.FormatUSTAR,
		}); err != nil {
			return nil, fmt.Errorf("capture export: %w", err)
		}
		if _, err := tw.Write(b); err != nil {
			return nil, fmt.Errorf("capture export: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("capture export: %w", err)
	}
	return skipped, nil
}
