package plugin

import (
	"errors"
	"flag"
	"io"

	"github.com/spf13/cobra"
)

// newUndoKeyCommand is `synchook undo-key [--rotate FILE]`. undoKey parses its own flags for
// now (undokey.go is being changed elsewhere; it moves to cobra flags after that).
func newUndoKeyCommand(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "undo-key",
		Short: "Print a new undo key ring (or FILE's ring with a new sealing key)",
		Long: `Print a new undo key ring (one key), or with --rotate FILE the ring in FILE followed by a new
key, which seals from then on while the older keys still open what they sealed. The output is
the ring text --undo-key-file reads; store it in a Secret and mount it. Nothing else is printed:
the output is a secret.`,
		Example: `  synchook undo-key > keys
  kubectl create secret generic synchook-undo-key --from-file=keys=keys`,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return exitCode(undoKey(args, stdout, stderr))
		},
	}
}

// flagExit is the exit code of a standard flag package error.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}
