package plugin

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/synchook/synchook/internal/undo"
)

// undoKey is `synchook undo-key [--rotate FILE]`: it prints a new undo key ring (one key), or
// with --rotate the ring in FILE followed by a new key, which seals from then on while the
// older keys still open what they sealed. The output is the ring text --undo-key-file reads;
// store it in a Secret (kubectl create secret generic synchook-undo-key --from-file=keys=FILE)
// and mount it. Nothing else is printed: the output is a secret.
func undoKey(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("undo-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rotate := fs.String("rotate", "", "read this undo key ring file and print it with a new key added (the new key seals; every key opens)")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "synchook undo-key: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var (
		ring *undo.Ring
		err  error
	)
	if *rotate != "" {
		data, rerr := os.ReadFile(*rotate)
		if rerr != nil {
			fmt.Fprintf(stderr, "synchook undo-key: %v\n", rerr)
			return exitFailed
		}
		if ring, err = undo.ParseRing(data); err == nil {
			ring, err = ring.Rotate()
		}
	} else {
		ring, err = undo.GenerateRing()
	}
	if err != nil {
		fmt.Fprintf(stderr, "synchook undo-key: %v\n", err)
		return exitFailed
	}
	text, err := ring.MarshalText()
	if err != nil {
		fmt.Fprintf(stderr, "synchook undo-key: %v\n", err)
		return exitFailed
	}
	_, _ = stdout.Write(text)
	return exitOK
}
