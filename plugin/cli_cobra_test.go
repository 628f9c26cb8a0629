package plugin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runWithEnv runs the CLI like runCLI, with env as the whole environment the Plugin reads.
func runWithEnv(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	p := New()
	p.Getenv = func(k string) string { return env[k] }
	code := p.run(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestTheCommandLineParsesAsKubectlDoes runs the command lines of issue 52: flags anywhere on
// the line, help per command, --version, completion, kubectl's cluster flags, one usage line for
// a wrong flag.
func TestTheCommandLineParsesAsKubectlDoes(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: k, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: other, context: {cluster: k}}]
current-context: other
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, version, _ := runCLI(t, "version")
	cases := []struct {
		name        string
		env         map[string]string
		args        []string
		code        int
		stdout      []string // each must be in stdout
		stderr      []string // each must be in stderr
		exactStderr string   // when set, stderr is exactly this
		noStdout    []string // none may be in stdout
	}{
		{
			name: "flags after the paths are flags (test examples/features/ -o junit)",
			args: []string{"test", "../examples/features/", "-o", "junit", "--timeout", "5s", "--root", ".."},
			code: 0, stdout: []string{`<?xml version="1.0"`, "<testsuites>"},
		},
		{
			name: "help test prints test's own help",
			args: []string{"help", "test"},
			code: 0, stdout: []string{"Run the test files (synchook-test.yaml) below each DIR", "synchook test [DIR|FILE...] [flags]", "-o, --output", "--update"},
			noStdout: []string{"Available Commands", "--bind-address"},
		},
		{
			name: "--version prints what version prints",
			args: []string{"--version"},
			code: 0, stdout: []string{version},
		},
		{
			name: "completion bash prints a script for synchook",
			args: []string{"completion", "bash"},
			code: 0, stdout: []string{"# bash completion V2 for synchook", "__start_synchook"},
		},
		{
			name: "cleanup with kubectl's flags parses and fails on the missing context",
			env:  map[string]string{"KUBECONFIG": kubeconfig},
			args: []string{"cleanup", "-n", "NS", "--context", "C", "--dry-run"},
			code: 2, stderr: []string{`synchook cleanup: the host cluster's client config (--kubeconfig, --context, KUBECONFIG): context "C" does not exist`},
		},
		{
			name: "cleanup's --kubeconfig overrides KUBECONFIG",
			env:  map[string]string{"KUBECONFIG": filepath.Join(t.TempDir(), "missing")},
			args: []string{"cleanup", "--dry-run", "--kubeconfig", kubeconfig, "--namespace=NS", "--context=C"},
			code: 2, stderr: []string{`context "C" does not exist`},
		},
		{
			name: "an unknown flag prints the error and one usage line",
			args: []string{"test", "../examples/", "--nope"},
			code: 2, exactStderr: "synchook test: unknown flag: --nope\nRun 'synchook test --help' for usage.\n",
		},
		{
			name: "a missing flag value is a usage error too",
			args: []string{"mutate", "--type"},
			code: 2, exactStderr: "synchook mutate: flag needs an argument: --type\nRun 'synchook mutate --help' for usage.\n",
		},
		{
			name: "cleanup's old --key-secret works and says it is deprecated",
			env:  map[string]string{"KUBECONFIG": kubeconfig},
			args: []string{"cleanup", "-n", "NS", "--key-secret", "my-key", "--context", "C"},
			code: 2, stderr: []string{"Flag --key-secret has been deprecated, use --undo-key-secret instead", `context "C" does not exist`},
		},
		{
			name: "no arguments print the help and exit 2",
			args: nil,
			code: 2, stdout: []string{"Available Commands:", "serve", "cleanup", "completion"},
			noStdout: []string{"--bind-address"},
		},
		{
			name: "help is a short list of commands",
			args: []string{"--help"},
			code: 0, stdout: []string{"Available Commands:", "-v, --version"},
			noStdout: []string{"--bind-address", "--zap-log-level"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runWithEnv(t, tc.env, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			for _, not := range tc.noStdout {
				if strings.Contains(out, not) {
					t.Errorf("stdout has %q:\n%s", not, out)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			if tc.exactStderr != "" && (errOut != tc.exactStderr || out != "") {
				t.Errorf("stderr %q and stdout %q, want %q and nothing", errOut, out, tc.exactStderr)
			}
		})
	}
}

// TestOldFlagNamesSetTheNewOnes: each deprecated name sets the variable of its new name and is
// hidden from the help.
func TestOldFlagNamesSetTheNewOnes(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		old, flag string
	}{
		{"serve's --undo-key-secret-name is --undo-key-secret", []string{"serve", "--undo-key-secret-name", "old-name"}, "undo-key-secret-name", "undo-key-secret"},
		{"serve's --undo-key-namespace is -n/--namespace", []string{"serve", "--undo-key-namespace", "old-ns"}, "undo-key-namespace", "namespace"},
		{"cleanup's --key-secret is --undo-key-secret", []string{"cleanup", "--key-secret", "old-name"}, "key-secret", "undo-key-secret"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := New().newRootCommand(strings.NewReader(""), &out, &errOut)
			cmd, args, err := root.Find(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.ParseFlags(args); err != nil {
				t.Fatal(err)
			}
			if got, want := cmd.Flags().Lookup(tc.flag).Value.String(), tc.args[2]; got != want {
				t.Errorf("--%s = %q after --%s %s", tc.flag, got, tc.old, want)
			}
			if want := "Flag --" + tc.old + " has been deprecated, use --" + tc.flag + " instead\n"; errOut.String() != want || out.Len() != 0 {
				t.Errorf("stderr %q, stdout %q; want the notice %q on stderr only", errOut.String(), out.String(), want)
			}
			if strings.Contains(cmd.UsageString(), "--"+tc.old+" ") {
				t.Errorf("the help lists the old name --%s", tc.old)
			}
		})
	}
}
