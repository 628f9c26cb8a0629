package docs_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	_ "github.com/synchook/synchook/config/policy" // as main.go: the synchook binary has policy hooks
	"github.com/synchook/synchook/plugin"
)

// TestMain makes this test binary the synchook command of the docs' scripts: testscript puts a
// `synchook` on their PATH that runs main.go's two calls in a new process of this binary, so a
// documented `synchook …` (or `go run . …`) line runs the real CLI of this checkout, under -race
// when the test does, with no separate build.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"synchook": func() {
			plugin.MustInit()
			plugin.MustStart()
		},
	})
}

// docFiles are the user docs whose command blocks run: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// Why a command block is not run here (the reasons of untestedBlocks).
const (
	needsCluster = "needs a Kubernetes cluster"
	takesMinutes = "takes minutes (hack/test.sh runs the bench command with tiny bounds instead)"
)

// untestedBlocks is the one list of the command blocks of README.md and docs/*.md that
// TestDocCommandBlocksRun does not run: the file, the block's first line (as in the Markdown,
// indentation and trailing space taken off) and why. At most one in five command blocks may be
// here; an entry that names no block any more fails the test, so the list cannot rot either.
var untestedBlocks = []struct{ file, first, reason string }{
	{"README.md", "vcluster create my-vcluster -n my-ns -f plugin.yaml", needsCluster + " (plugin/chart_test.go renders plugin.yaml with the real chart)"},
	{"docs/capture-replay.md", "kubectl exec -n my-ns my-vcluster-0 -c synchook -- /plugin/plugin capture export /var/run/synchook/capture > capture.tar", needsCluster + " (plugin/replay_export_test.go runs capture export)"},
	{"docs/day2.md", "kubectl -n vcluster-my-vcluster scale statefulset my-vcluster --replicas 0", needsCluster + " (e2e/ runs cleanup against a kube-apiserver)"},
	{"docs/day2.md", "NS=vcluster-my-vcluster SECRET=synchook-undo-key", needsCluster + " (the key Secret; the undo-key block before it runs here)"},
	{"docs/performance.md", "go run ./cmd/synchook-bench bench     # ~60 s: throughput, p50/p99/p999 at concurrency 1/16/64 of every transport, of", takesMinutes},
}

// snippetTest is the test that runs the README's five-minute blocks (those after a
// <!-- snippet: five-minute … --> marker) in a module of their own; this test counts them as run.
const snippetTest = "TestReadmeFiveMinuteHookBuildsAndRuns"

// commandLangs are the info strings of a command block. A console block holds `$ ` command lines,
// each followed by its expected output; the others are run as one script.
var commandLangs = []string{"sh", "bash", "shell", "console"}

// commandWords are the first words that make a fenced block without an info string a command
// block that should say so (`sh`): the test fails on it rather than skip it silently.
var commandWords = []string{"synchook", "go", "make", "kubectl", "helm", "vcluster", "curl", "git", "tar", "docker", "/plugin/plugin", "cd", "echo", "cat", "$"}

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file    string // relative to the repository, e.g. "docs/undo.md"
	line    int    // the opening fence's line
	lang    string // the info string's first word, "" if none
	text    string // the body, the fence's indentation taken off, each line ending in "\n"
	snippet string // NAME of a <!-- snippet: NAME --> marker right before it, if any
}

// first returns the block's first non-blank line, trimmed.
func (b docBlock) first() string {
	for line := range strings.SplitSeq(b.text, "\n") {
		if s := strings.TrimSpace(line); s != "" {
			return s
		}
	}
	return ""
}

func (b docBlock) String() string {
	return fmt.Sprintf("%s:%d (```%s %q)", b.file, b.line, b.lang, b.first())
}

// fencedBlocks returns the fenced blocks of a Markdown file in order. A block that is not closed
// is an error.
func fencedBlocks(path, name string) ([]docBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks  []docBlock
		cur     *docBlock
		fence   string
		indent  string
		body    strings.Builder
		lastNon string // the last non-blank line outside a block
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if cur != nil {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				cur.text = body.String()
				blocks = append(blocks, *cur)
				cur = nil
				body.Reset()
				lastNon = ""
				continue
			}
			body.WriteString(strings.TrimPrefix(line, indent) + "\n")
			continue
		}
		if marker := fenceMarker(trimmed); marker != "" {
			fence, indent = marker, line[:len(line)-len(trimmed)]
			info := strings.Fields(strings.TrimPrefix(trimmed, marker))
			cur = &docBlock{file: name, line: n}
			if len(info) > 0 {
				cur.lang = info[0]
			}
			if rest, ok := strings.CutPrefix(lastNon, "<!-- snippet:"); ok {
				cur.snippet = strings.TrimSpace(strings.TrimSuffix(rest, "-->"))
			}
			continue
		}
		if s := strings.TrimSpace(line); s != "" {
			lastNon = s
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a fenced block (%s) is not closed", name, cur.line, fence)
	}
	return blocks, nil
}

// TestDocCommandBlocksRun runs every command block (```sh, ```bash, ```shell, ```console) of
// README.md and docs/*.md as a testscript script against this checkout's CLI, unless
// untestedBlocks lists it (the README's five-minute blocks run in TestReadmeFiveMinuteHookBuildsAndRuns).
//
// Each script starts in its own $WORK, which holds a symbolic link to each top-level entry of the
// repository, so a block reads the repository's files (examples/pod.yaml) as from its top
// directory and what it writes stays in $WORK. Before a block runs: `go run . ` becomes
// `synchook ` (this checkout's CLI, see TestMain); `/tmp/` becomes the script's own $TMPDIR;
// serve's default ports :9443, :9440 and :9441 become free ports, and SERVE_FLAGS (make run's)
// points serve at them and at $TMPDIR/synchook/certs, RUN_BIN at $WORK/bin/synchook.
//
// A sh/bash/shell block runs as one `bash -e -o pipefail` script and must exit 0. In a console
// block each `$ ` line (continued by a trailing `\`) runs in its own bash, stdout and stderr
// together as a terminal shows them; the lines up to the next `$ ` are its expected output,
// matched line by line: a line `...` stands for any lines, `...` inside a line for any text, a
// duration `(0.00s)` for any, and a last line `[exit status N]` for a non-zero exit (without
// it the command must exit 0).
//
// It fails for a command block that is neither run nor listed (an untagged block starting with a
// command must say `sh`), for a listed block that no longer exists, and when more than one
// command block in five is listed. It logs how many blocks run and how many are listed, by reason.
func TestDocCommandBlocksRun(t *testing.T) {
	var run, snippets []docBlock
	listed := map[string]int{} // reason → count
	seen := make([]bool, len(untestedBlocks))
	for _, file := range docFiles(t) {
		blocks, err := fencedBlocks(filepath.Join(root, file), file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.lang == "" && slices.Contains(commandWords, strings.Fields(b.first() + " x")[0]) {
				t.Errorf("%s: a fenced block that starts with a command has no info string: make it ```sh (or ```console with `$ ` lines and their output), or ```text if it is output", b)
				continue
			}
			if !slices.Contains(commandLangs, b.lang) {
				continue
			}
			i := slices.IndexFunc(untestedBlocks, func(u struct{ file, first, reason string }) bool {
				return u.file == b.file && u.first == b.first()
			})
			switch {
			case i >= 0:
				seen[i] = true
				listed[untestedBlocks[i].reason]++
			case b.file == "README.md" && strings.HasPrefix(b.snippet, "five-minute "):
				snippets = append(snippets, b)
			default:
				run = append(run, b)
			}
		}
	}
	for i, u := range untestedBlocks {
		if !seen[i] {
			t.Errorf("untestedBlocks lists a block of %s starting %q that is not there any more: remove the entry, or fix its first line", u.file, u.first)
		}
	}
	total, nListed := len(run)+len(snippets), 0
	for _, n := range listed {
		total += n
		nListed += n
	}
	t.Logf("%d command blocks: %d run here, %d run by %s, %d listed as not run here", total, len(run), len(snippets), snippetTest, nListed)
	for _, reason := range slices.Sorted(func(yield func(string) bool) {
		for r := range listed {
			if !yield(r) {
				return
			}
		}
	}) {
		t.Logf("  listed, %s: %d", reason, listed[reason])
	}
	if nListed*5 > total {
		t.Errorf("%d of %d command blocks are listed in untestedBlocks: at most one in five may be", nListed, total)
	}
	if len(run) == 0 {
		t.Fatal("no command block to run")
	}

	dir := t.TempDir()
	var files []string
	names := map[string]bool{}
	for _, b := range run {
		script, err := blockScript(b)
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		name := strings.ReplaceAll(b.file, "/", "-") + ":" + strconv.Itoa(b.line)
		if names[name] {
			t.Fatalf("two blocks named %s", name)
		}
		names[name] = true
		path := filepath.Join(dir, name+".txtar")
		if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	checkout, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	goEnv := goEnvironment(t)
	testscript.Run(t, testscript.Params{
		Files:               files,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			return setupWork(env, checkout, goEnv)
		},
	})
}

// goEnvironment returns the go command's settings a block's `go build` (make run's) needs:
// testscript gives a script a HOME of its own, without which go has no cache.
func goEnvironment(t *testing.T) []string {
	t.Helper()
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN"}
	out, err := exec.CommandContext(t.Context(), "go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	values := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(values) != len(names) {
		t.Fatalf("go env printed %d lines for %d names: %q", len(values), len(names), out)
	}
	var env []string
	for i, n := range names {
		env = append(env, n+"="+values[i])
	}
	return env
}

// servePorts are serve's default ports as the docs write them, each replaced by a free port.
var servePorts = []string{"9443", "9440", "9441"}

// setupWork links the repository's top-level entries into the script's $WORK, fills the
// placeholders blockScript left in the block files ($TMPDIR, the ports) and sets SERVE_FLAGS and
// RUN_BIN for a `make run`.
func setupWork(env *testscript.Env, checkout string, goEnv []string) error {
	entries, err := os.ReadDir(checkout)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == ".git" || e.Name() == "bin" {
			continue
		}
		if err := os.Symlink(filepath.Join(checkout, e.Name()), filepath.Join(env.WorkDir, e.Name())); err != nil {
			return err
		}
	}
	for _, kv := range goEnv {
		k, v, _ := strings.Cut(kv, "=")
		env.Setenv(k, v)
	}
	tmp := env.Getenv("TMPDIR")
	ports := map[string]string{}
	for _, p := range servePorts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ports[p] = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		if err := l.Close(); err != nil {
			return err
		}
	}
	env.Setenv("RUN_BIN", filepath.Join(env.WorkDir, "bin", "synchook"))
	env.Setenv("SERVE_FLAGS", fmt.Sprintf("--bind-address 127.0.0.1:%s --health-probe-bind-address 127.0.0.1:%s --metrics-bind-address 127.0.0.1:%s --cert-dir %s",
		ports["9443"], ports["9440"], ports["9441"], filepath.Join(tmp, "synchook", "certs")))
	docDir := filepath.Join(env.WorkDir, ".doc")
	blockFiles, err := os.ReadDir(docDir)
	if err != nil {
		return err
	}
	for _, e := range blockFiles {
		path := filepath.Join(docDir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(data), "@TMPDIR@", tmp)
		for p, free := range ports {
			text = strings.ReplaceAll(text, "@PORT"+p+"@", free)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

var (
	goRunDot = regexp.MustCompile(`(^|[\s;&|(])go run \.(\s)`)
	tmpPath  = regexp.MustCompile(`(^|[\s'"=:@(])/tmp/`)
	portRe   = regexp.MustCompile(`:(` + strings.Join(servePorts, "|") + `)\b`)
)

// commandText maps a block's command text onto the script's world: `go run . ` runs this
// checkout's synchook, /tmp/ is the script's $TMPDIR and serve's default ports free ones (setupWork
// fills the placeholders).
func commandText(s string) string {
	s = goRunDot.ReplaceAllString(s, "${1}synchook${2}")
	s = tmpPath.ReplaceAllString(s, "${1}@TMPDIR@/")
	return portRe.ReplaceAllString(s, ":@PORT${1}@")
}

// blockTimeout bounds each block and each console command (timeout(1)'s duration): a block that
// waits for what never comes fails instead of hanging the test.
const blockTimeout = "180"

// blockPrelude starts each sh block: when it ends, however it ends (set -e, a signal), the jobs
// it started in the background (`make run &`) are stopped and waited for, so none keeps the
// script's output open or a port taken.
const blockPrelude = `trap 'exit 143' TERM INT
trap 'jobs -p | xargs -r kill 2>/dev/null || true; wait' EXIT
`

// runner runs one console command: stdout and stderr together, and its exit status as the last
// line when it is not 0 (as testscript prints it).
const runner = `bash -o pipefail "$1" 2>&1
status=$?
if [ "$status" -ne 0 ]; then echo "[exit status $status]"; fi
`

// blockScript returns the testscript script (txtar) that runs block b: its header names the file,
// the line and the block's first line, so a failure says which block of which file failed.
func blockScript(b docBlock) (string, error) {
	var script strings.Builder
	fmt.Fprintf(&script, "# %s:%d, the ```%s block starting %q\n", b.file, b.line, b.lang, b.first())
	files := map[string]string{}
	if b.lang != "console" {
		script.WriteString("exec timeout -k 10 " + blockTimeout + " bash -e -o pipefail .doc/block\n")
		files["block"] = blockPrelude + commandText(b.text)
	} else {
		cmds, err := consoleCommands(b.text)
		if err != nil {
			return "", err
		}
		files["run"] = runner
		for i, c := range cmds {
			name := fmt.Sprintf("cmd%d", i+1)
			files[name] = commandText(c.command) + "\n"
			fmt.Fprintf(&script, "\n# $ %s\nexec timeout -k 10 %s bash .doc/run .doc/%s\nstdout %s\n", strings.ReplaceAll(c.command, "\n", "\n# "), blockTimeout, name, quoteArg(outputPattern(c.output)))
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	}) {
		fmt.Fprintf(&script, "-- .doc/%s --\n%s", name, files[name])
	}
	return script.String(), nil
}

// consoleCommand is one `$ ` command of a console block and the output the block shows for it.
type consoleCommand struct {
	command string   // without the `$ `, continuation lines joined by "\n"
	output  []string // the lines after it
}

// consoleCommands splits a console block into its commands. Text before the first `$ ` line is
// an error.
func consoleCommands(text string) ([]consoleCommand, error) {
	var (
		cmds      []consoleCommand
		continued bool   // the command goes on: its last line ended in `\`
		heredoc   string // the word that ends the command's here-document, "" if none is open
	)
	for line := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		inCommand := continued || heredoc != ""
		switch {
		case inCommand:
			cmds[len(cmds)-1].command += "\n" + line
			if heredoc != "" && strings.TrimSpace(line) == heredoc {
				heredoc = ""
			}
		case strings.HasPrefix(line, "$ "):
			cmds = append(cmds, consoleCommand{command: strings.TrimPrefix(line, "$ ")})
		case len(cmds) == 0:
			return nil, fmt.Errorf("a console block must start with a `$ ` command line, not %q", line)
		default:
			cmds[len(cmds)-1].output = append(cmds[len(cmds)-1].output, line)
		}
		if inCommand && heredoc == "" && !continued {
			continue // the here-document's last line
		}
		if inCommand || strings.HasPrefix(line, "$ ") {
			continued = strings.HasSuffix(line, `\`)
			if m := hereDoc.FindStringSubmatch(line); m != nil && heredoc == "" {
				heredoc = m[1]
			}
		}
	}
	if heredoc != "" {
		return nil, fmt.Errorf("a here-document is not closed by %q", heredoc)
	}
	return cmds, nil
}

// hereDoc finds a here-document's word in a command line: <<EOF, <<'EOF', <<"EOF", <<-EOF.
var hereDoc = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

var duration = regexp.MustCompile(`\\\(\d+\\\.\d+s\\\)`)

// outputPattern turns a console command's expected output lines into one regular expression over
// its whole output: `...` alone is any lines, `...` in a line any text, `(0.00s)` any duration;
// trailing space is not compared (the runner's output keeps it, so lines may end in spaces).
func outputPattern(lines []string) string {
	var re strings.Builder
	re.WriteString(`\A`)
	for _, line := range lines {
		line = strings.TrimRight(line, " \t")
		if line == "..." {
			re.WriteString(`(?:.*\n)*?`)
			continue
		}
		parts := strings.Split(line, "...")
		for i, p := range parts {
			parts[i] = duration.ReplaceAllString(regexp.QuoteMeta(p), `\(\d+\.\d+s\)`)
		}
		re.WriteString(strings.Join(parts, `.*?`) + `[ \t]*\n`)
	}
	re.WriteString(`\z`)
	return re.String()
}

// quoteArg quotes s as one testscript argument.
func quoteArg(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func TestConsoleBlocksSplitIntoCommandsAndMatchTheirOutput(t *testing.T) {
	for _, tc := range []struct {
		name, block, output string
		want, wantErr       string
		match               bool
	}{
		{
			name:   "a command's output must be the lines after it",
			block:  "$ synchook version\nsynchook v1\n",
			output: "synchook v1\n",
			match:  true,
		},
		{
			name:   "a different line does not match",
			block:  "$ synchook version\nsynchook v1\n",
			output: "synchook v2\n",
		},
		{
			name:   "a line the doc does not show does not match",
			block:  "$ synchook version\nsynchook v1\n",
			output: "synchook v1\nmore\n",
		},
		{
			name:   "a line ... stands for any lines and ... in a line for any text",
			block:  "$ synchook test .\n--- PASS: a (0.00s)\n...\nok\t... cases\n",
			output: "--- PASS: a (1.25s)\nx\ny\nok\t3 cases\n",
			match:  true,
		},
		{
			name:   "a non-zero exit must be shown as the last line",
			block:  "$ synchook nope\nerror\n",
			output: "error\n[exit status 2]\n",
		},
		{
			name:   "a here-document belongs to its command, the lines after it are output",
			block:  "$ cat > f <<'EOF'\nhooks: []\nEOF\nok\n",
			output: "ok\n",
			match:  true,
		},
		{
			name:   "a continued command line belongs to its command",
			block:  "$ synchook mutate \\\n  -f x\nok\n",
			output: "ok\n",
			match:  true,
		},
		{
			name:    "output before the first command is an error",
			block:   "oops\n$ synchook\n",
			wantErr: "must start with a `$ ` command line",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmds, err := consoleCommands(tc.block)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cmds) != 1 {
				t.Fatalf("%d commands, want 1: %q", len(cmds), cmds)
			}
			re := regexp.MustCompile(outputPattern(cmds[0].output))
			if got := re.MatchString(tc.output); got != tc.match {
				t.Errorf("pattern %s on %q: match %v, want %v", re, tc.output, got, tc.match)
			}
		})
	}
}

func TestCommandTextRunsThisCheckoutInTheScriptsOwnPlaces(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"go run . is the synchook of this checkout", "go run . mutate -f x | go run . test .", "synchook mutate -f x | synchook test ."},
		{"go run of another package stays", "go run ./cmd/synchook-bench bench", "go run ./cmd/synchook-bench bench"},
		{"a /tmp path is the script's own", "undo-key > /tmp/keys --cacert /tmp/synchook/certs/ca.crt", "undo-key > @TMPDIR@/keys --cacert @TMPDIR@/synchook/certs/ca.crt"},
		{"serve's default ports become free ports", "curl https://localhost:9443/mutate localhost:9440/readyz :94431", "curl https://localhost:@PORT9443@/mutate localhost:@PORT9440@/readyz :94431"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commandText(tc.in); got != tc.want {
				t.Errorf("commandText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
