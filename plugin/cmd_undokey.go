package plugin

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// undoKeyFlags returns undo-key's flags and the options they set.
func undoKeyFlags() (*pflag.FlagSet, *undoKeyOptions) {
	o := &undoKeyOptions{}
	fs := pflag.NewFlagSet("undo-key", pflag.ContinueOnError)
	fs.StringVar(&o.rotate, "rotate", "", "read this undo key ring file and write it with a new key added (the new key seals; every key opens); nothing is written when it cannot be read or holds no key")
	fs.StringVarP(&o.output, "output", "o", "", "write the ring to this file (mode 0600, replaced whole: a temporary file in its directory renamed over it; it may be the --rotate file) instead of stdout")
	return fs, o
}

// newUndoKeyCommand is `synchook undo-key [--rotate FILE] [-o FILE]`.
func newUndoKeyCommand(stdout, stderr io.Writer) *cobra.Command {
	fs, o := undoKeyFlags()
	cmd := &cobra.Command{
		Use:   "undo-key",
		Short: "Write a new undo key ring, or FILE's ring with a new sealing key",
		Long: `Write a new undo key ring (one key), or with --rotate FILE the ring in FILE followed by a new
key, which seals from then on while the older keys still open what they sealed. The output is
the ring text --undo-key-file reads, on stdout or with -o in FILE (mode 0600, replaced
atomically, so --rotate keys -o keys rotates in place; never redirect the output into the
--rotate file: the shell empties it first). Nothing else is printed: the output is a secret.

Exit codes: 0 written; 1 nothing written (the --rotate file missing, unreadable, empty or not a
key ring; the -o file cannot be written); 2 bad flags or an argument.`,
		Example: `  synchook undo-key -o keys
  kubectl create secret generic synchook-undo-key --from-file=keys=keys
  # rotation, in place (docs/day2.md#rotate-the-key)
  synchook undo-key --rotate keys -o keys`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			return nil
		},
		RunE: func(_ *cobra.Command, _ []string) error {
			return exitCode(runUndoKey(*o, stdout, stderr))
		},
	}
	cmd.Flags().AddFlagSet(fs)
	return cmd
}
