package plugin

import (
	"cmp"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/synchook/synchook/hooks"
)

// Exit codes of every command (docs/cli.md has the table).
const (
	exitOK     = 0
	exitFailed = 1 // differences, failures
	exitUsage  = 2 // bad flags or arguments, invalid configuration
	// 3 is cleanup's exitUnfinished.
)

// usageError is a command-line mistake (an unknown flag, a missing argument): run prints it with
// one usage line and exits exitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a *usageError with the formatted message.
func usageErrorf(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

// exitCode turns the exit code of a command's run function into RunE's error: nil for exitOK,
// else an *ExitError (the command has printed its message).
func exitCode(code int) error {
	if code == exitOK {
		return nil
	}
	return &ExitError{Code: code}
}

// run is the CLI: it runs the command in args (without the program name) and returns the exit
// code. No arguments print the help and exit exitUsage.
func (p *Plugin) run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := p.newRootCommand(stdin, stdout, stderr)
	if len(args) == 0 {
		_ = root.Help()
		return exitUsage
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var exit *ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &exit):
		return exit.Code
	}
	// Every other error is the command line's: cobra's (unknown command, wrong arguments) or
	// pflag's (unknown flag, bad value) or a *usageError of a command.
	cmd = cmp.Or(cmd, root)
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
	return exitUsage
}

// newRootCommand returns the synchook command tree, reading stdin and writing stdout (help,
// results) and stderr (errors, progress, pflag's deprecation notices).
func (p *Plugin) newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "synchook",
		Short: "Run hooks on the objects a vcluster syncer writes and reads",
		Long: `synchook runs hooks on the objects a vcluster syncer writes to the host cluster and reads
back, as a mutating admission webhook that answers with JSON Patches (serve), as a vcluster
plugin, and offline (mutate, test, replay).

Started by vcluster as a plugin v2 (no arguments, VCLUSTER_PLUGIN=vcluster in the environment),
it serves vcluster's go-plugin protocol with the hook config from PLUGIN_CONFIG.

Hook types: ` + hooks.ValidHookTypes() + `

Exit codes: 0 success; 1 differences or failures; 2 usage or configuration errors; 3 partial
failures (cleanup). See docs/cli.md.`,
		Example: `  # Run the sidecar with a hook config
  synchook serve --config hooks.yaml

  # Dry-run a hook type on an object, offline
  synchook mutate --type CreatePhysical -f pod.yaml

  # Run the test files below examples/ and write JUnit XML
  synchook test examples/ -o junit`,
		Version:       Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Completion scripts are generated with the program's own name (synchook, or a Go-hook
		// binary's): cobra takes it from Use.
	}
	root.SetVersionTemplate("synchook {{.Version}}\n")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(
		p.newServeCommand(stderr),
		p.newMutateCommand(stdin, stdout, stderr),
		p.newReplayCommand(stdout, stderr),
		newCaptureCommand(stdout, stderr),
		p.newTestCommand(stdout, stderr),
		p.newCleanupCommand(stdout, stderr),
		newUndoKeyCommand(stdout, stderr),
		newInstallCommand(stderr),
		newVersionCommand(stdout),
	)
	// cobra adds these when it executes; added here so that the help of `synchook` without
	// arguments and the generated reference (docs/cli/) list them too.
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	// pflag writes a deprecated flag's notice to its FlagSet's output, which cobra points at a
	// buffer it then prints to stdout: stdout carries results (a key ring, mutate -o yaml), so
	// the notices go to stderr.
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().SetOutput(stderr)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return root
}

// newVersionCommand is `synchook version`, which prints what `synchook --version` prints.
func newVersionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Long:    "Print synchook's version, as synchook --version does.",
		Example: "  synchook version",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(stdout, "synchook %s\n", Version())
			return nil
		},
	}
}

// noArgs is cobra.Args for a command that takes no argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", args[0])
	}
	return nil
}

// deprecatedAlias adds old to fs as a hidden, deprecated alias of the flag name: it sets the
// same variable, and pflag prints "Flag --old has been deprecated, use --name instead" when it
// is used.
func deprecatedAlias(fs *pflag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("deprecatedAlias: no flag " + name)
	}
	fs.AddFlag(&pflag.Flag{Name: old, Usage: f.Usage, Value: f.Value, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal})
	if err := fs.MarkDeprecated(old, "use --"+name+" instead"); err != nil {
		panic(err)
	}
}
