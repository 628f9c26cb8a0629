package plugin

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/term"

	"github.com/synchook/synchook/internal/capture"
)

// captureExport is `synchook capture export DIR`: it writes the capture files of DIR (serve
// --capture DIR) to stdout as one tar stream (capture.Export), for a container without tar:
// `kubectl exec -c synchook POD -- /plugin/plugin capture export DIR > capture.tar`. Files it
// leaves out (symbolic links, files of other users, files deleted while it ran) are named on
// stderr. Exit 0: every file exported; 1: some left out (the stream holds the rest) or the
// stream could not be written; 2: bad arguments, stdout a terminal, DIR missing, a symbolic
// link or writable by group or others.
func captureExport(dir string, stdout, stderr io.Writer) int {
	fail := failer(stderr, "capture")
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return fail(exitUsage, "export writes a tar stream: redirect stdout to a file (> capture.tar)")
	}
	if info, err := os.Stat(dir); err != nil {
		return fail(exitUsage, "%v", err)
	} else if !info.IsDir() {
		return fail(exitUsage, "%s is not a directory", dir)
	}
	if _, _, err := capture.ReplayFiles(dir); err != nil { // a directory others can write or re-point
		return fail(exitUsage, "%v", err)
	}
	skipped, err := capture.Export(dir, stdout)
	if err != nil {
		return fail(exitFailed, "%v", err)
	}
	for _, s := range skipped {
		fmt.Fprintf(stderr, "synchook capture: left out %s: %s\n", filepath.Base(s.Path), s.Reason)
	}
	if len(skipped) > 0 {
		return exitFailed
	}
	return exitOK
}

// captureUsage is the one line on capture export in capture's usage errors.
const captureUsage = "synchook capture export DIR > capture.tar: write the capture files of DIR as a tar stream (tar -xf makes ./capture for replay)"
