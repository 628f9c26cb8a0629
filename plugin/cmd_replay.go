package plugin

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/synchook/synchook/webhook"
)

// replayFlags returns replay's flags and the options they set.
func replayFlags() (*pflag.FlagSet, *replayOptions) {
	o := &replayOptions{}
	fs := pflag.NewFlagSet("replay", pflag.ContinueOnError)
	fs.StringVar(&o.configFile, "config", "", "path of the YAML hook config to replay with; empty: the SYNCHOOK_CONFIG env var, else the built-in default, or none in a program with Go hooks")
	fs.DurationVar(&o.timeout, "timeout", webhook.DefaultRequestTimeout, "time each request's hook chain may take")
	fs.BoolVar(&o.skipIdempotencyCheck, "skip-idempotency-check", false, "do not refuse a hook chain that changes its own result again (checked on built-in sample objects)")
	fs.StringVar(&o.undoKeyFile, "undo-key-file", "", "the undo key ring file the captured synchook used, so that sealed undos open and compare; empty: a throwaway key, sealed undos compare as \"sealed\" only and reads of objects carrying one are reported unverifiable")
	return fs, o
}

// newReplayCommand is `synchook replay DIR`.
func (p *Plugin) newReplayCommand(stdout, stderr io.Writer) *cobra.Command {
	fs, o := replayFlags()
	cmd := &cobra.Command{
		Use:   "replay DIR",
		Short: "Replay the requests serve --capture DIR saved through this build and config",
		Long: `Run every request that serve --capture DIR saved through this build's hooks and the config,
and print per request whether the outcome is the captured one and, when it is not, a diff of
the resulting objects; then a summary, overall and per hook. Without --undo-key-file it seals
with a throwaway key: sealed undos compare as "sealed", and a read of an object carrying a
sealed undo whose outcome differs is "unverifiable". Symbolic links and other users' files in
DIR are skipped, each named on stderr.

Exit codes: 0 all equal or unverifiable; 1 some differ, failed or were skipped; 2 bad flags, no
DIR or capture files, a DIR that is a symbolic link or writable by group or others, an invalid
config.`,
		Example: `  # Would the new config change what the captured requests got?
  synchook replay ./capture --config new-hooks.yaml --undo-key-file keys`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want exactly one argument, the capture directory (serve --capture DIR)")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return exitCode(p.replay(o, args, stdout, stderr))
		},
	}
	cmd.Flags().AddFlagSet(fs)
	return cmd
}
