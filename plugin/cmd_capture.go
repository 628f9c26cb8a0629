package plugin

import (
	"io"

	"github.com/spf13/cobra"
)

// newCaptureCommand is `synchook capture`, whose one subcommand is `export DIR`.
func newCaptureCommand(stdout, stderr io.Writer) *cobra.Command {
	capture := &cobra.Command{
		Use:   "capture",
		Short: "Work with the capture directory of serve --capture",
		Long: `Work with the directory serve --capture DIR writes: export writes it as one tar stream, for a
container without tar (the distroless image).`,
		Example: `  kubectl exec -c synchook POD -- /plugin/plugin capture export /var/run/synchook/capture > capture.tar`,
		// Without a subcommand, or with an unknown one: a usage error, not the help and exit 0.
		RunE: func(*cobra.Command, []string) error {
			return usageErrorf("want `capture export DIR` (%s)", captureUsage)
		},
	}
	capture.AddCommand(&cobra.Command{
		Use:   "export DIR",
		Short: "Write the capture files of DIR to stdout as one tar stream",
		Long: `Write the capture files of DIR (serve --capture DIR) to stdout as one tar stream: capture/
(0700) and each own capture file (0600, bytes as on disk); tar -xf makes ./capture for synchook
replay. Files it leaves out (symbolic links, files of other users, files deleted while it ran)
are named on stderr.

Exit codes: 0 every file exported; 1 some left out (the stream holds the rest) or the stream
could not be written; 2 bad arguments, stdout a terminal, DIR missing, a symbolic link or
writable by group or others.`,
		Example: `  synchook capture export /var/run/synchook/capture > capture.tar
  tar -xf capture.tar && synchook replay capture`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want `capture export DIR` (%s)", captureUsage)
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return exitCode(captureExport(args[0], stdout, stderr))
		},
	})
	return capture
}
