package plugin

import (
	"io"
	"time"

	"github.com/spf13/cobra"
)

// testOptions are the flags of `synchook test`.
type testOptions struct {
	update  bool
	output  string
	timeout time.Duration
	root    string
}

// newTestCommand is `synchook test [DIR|FILE...]`.
func (p *Plugin) newTestCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test [DIR|FILE...]",
		Short: "Run the hook test files (synchook-test.yaml) below DIR (default .)",
		Long: `Run the test files (synchook-test.yaml) below each DIR, or the FILEs, through this binary's
config handling and Go hooks: each case's write gives the expected object, and reads it back
without a trace (docs/testing.md). One line per case, like go test; -o junit writes JUnit XML.

It reads only files inside the working directory (or --root DIR), and never prints a Secret
value: a diff shows Secret data and stringData values as keyed HMACs.

Exit codes: 0 every case passed; 1 a case failed; 2 bad flags, an invalid test file or config,
a file outside the root, or no test file.`,
		Example: `  # Every test file below the current directory
  synchook test

  # The examples, as JUnit XML for CI
  synchook test examples/ -o junit > junit.xml

  # Rewrite the expected objects kept in files with what the cases give
  synchook test hooks/ --update`,
		RunE: func(_ *cobra.Command, paths []string) error {
			if o.output != "" && o.output != "junit" {
				return usageErrorf("-o %q: want junit (or nothing)", o.output)
			}
			return exitCode(p.test(o, paths, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&o.update, "update", false, "rewrite the expected objects kept in files (regular files inside the test file's directory) with what the cases give")
	fs.StringVarP(&o.output, "output", "o", "", `output format: "" (one line per case, like go test) or junit (JUnit XML)`)
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on each request")
	fs.StringVar(&o.root, "root", ".", "the directory whose files test reads (the test files and every file they name): a file outside it, or a symbolic link out of it, is refused (exit 2)")
	return cmd
}
