package plugin

import (
	"io"

	"github.com/spf13/cobra"
)

// newInstallCommand is `synchook install DIR`.
func newInstallCommand(stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "install DIR",
		Short: "Copy this binary to DIR/plugin (the vcluster plugin v2 init container)",
		Long: `Copy this binary to DIR/plugin (mode 0755, written beside it and renamed), the layout
vcluster's plugin manager loads plugins v2 from (/plugins/<name>/plugin). The chart's init
container runs it when the image has no sh for its default "cp -r /plugin /plugins/<name>".

Exit codes: 0 installed; 1 the copy failed; 2 not exactly one argument.`,
		Example: `  synchook install /plugins/synchook`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want exactly one argument, the plugin directory (e.g. /plugins/synchook)")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return exitCode(install(args[0], stderr))
		},
	}
}
