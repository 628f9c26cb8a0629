package docs_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fiveMinuteHeading is the README section whose snippets TestReadmeFiveMinuteHookBuildsAndRuns
// runs.
const fiveMinuteHeading = "## Write a hook in five minutes"

// cloneLine is the first line of the README's "five-minute module" block. The test does not run
// it: it stands in for the clone with a link to this checkout, named as the clone would be.
const cloneLine = "git clone https://github.com/synchook/synchook"

// TestReadmeFiveMinuteHookBuildsAndRuns does what README.md's "Write a hook in five minutes"
// tells a new hook author to do, with the README's own text: it takes the blocks marked
// <!-- snippet: five-minute module -->, <!-- snippet: five-minute main.go --> and
// <!-- snippet: five-minute try --> out of that section and runs them, in that order and in one
// bash shell, in a fresh directory beside a link to this checkout named as the README's clone
// (its `replace` then points here): go mod init, go mod edit -replace, main.go as printed,
// go mod tidy (the module proxy must be reachable for synchook's dependencies), go build, and
// the built binary's `mutate` of each hook type the block runs. Each mutate must report that one
// hook ran and show the hook's label. It builds a whole synchook binary (about a minute with a
// warm build cache), so -short skips it; hack/test.sh's unit step runs it.
func TestReadmeFiveMinuteHookBuildsAndRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a synchook binary from the README's snippet")
	}
	checkout, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	snippets, err := readmeSnippets(filepath.Join(root, "README.md"), fiveMinuteHeading)
	if err != nil {
		t.Fatal(err)
	}
	module, mainGo, try := snippets["five-minute module"], snippets["five-minute main.go"], snippets["five-minute try"]
	for name, text := range map[string]string{"five-minute module": module, "five-minute main.go": mainGo, "five-minute try": try} {
		if text == "" {
			t.Fatalf("README.md's %q section has no fenced block marked <!-- snippet: %s --> (found: %v)", fiveMinuteHeading, name, keys(snippets))
		}
	}
	first, rest, _ := strings.Cut(module, "\n")
	if first != cloneLine {
		t.Fatalf("the five-minute module block starts with %q, want %q (the test stands in for it with a link to this checkout)", first, cloneLine)
	}
	if strings.Contains(mainGo, "SYNCHOOK_SNIPPET") {
		t.Fatal("the five-minute main.go holds the test's here-document delimiter SYNCHOOK_SNIPPET")
	}

	dir := t.TempDir()
	if err := os.Symlink(checkout, filepath.Join(dir, "synchook")); err != nil {
		t.Fatal(err)
	}
	script := "set -euo pipefail\n" + rest +
		"cat > main.go <<'SYNCHOOK_SNIPPET'\n" + mainGo + "SYNCHOOK_SNIPPET\n" +
		try
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
	cmd.Dir = dir
	// -mod=mod as a hook author's shell has it (no vendor directory, go.mod may change); the
	// caller's GOFLAGS (e.g. -buildvcs=false) stay. GOWORK=off: no go.work above the temp dir
	// applies.
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's five-minute steps failed: %v\nscript:\n%s\noutput:\n%s", err, script, out)
	}

	types := mutateTypes(try)
	if len(types) == 0 {
		t.Fatalf("the five-minute try block runs no `./pod-hook mutate --type T`:\n%s", try)
	}
	for _, typ := range types {
		t.Run(fmt.Sprintf("the mutate of %s runs the hook and shows its label", typ), func(t *testing.T) {
			_, section, found := strings.Cut(string(out), "# JSON Patch ("+typ+", ")
			if !found {
				t.Fatalf("no %q in the output:\n%s", "# JSON Patch ("+typ+", ", out)
			}
			section, _, _ = strings.Cut(section, "# JSON Patch (")
			for _, want := range []string{"hooks run: 1)", `"example.com/tenant":"team-a"`, "example.com/tenant: team-a"} {
				if !strings.Contains(section, want) {
					t.Errorf("the %s output has no %q:\n%s", typ, want, section)
				}
			}
		})
	}
}

// mutateTypes returns the --type of each `mutate` line of a shell block, in order.
func mutateTypes(block string) []string {
	var types []string
	for line := range strings.SplitSeq(block, "\n") {
		fields := strings.Fields(line)
		for i, f := range fields {
			if f == "mutate" {
				for j := i + 1; j+1 < len(fields); j++ {
					if fields[j] == "--type" {
						types = append(types, fields[j+1])
						break
					}
				}
			}
		}
	}
	return types
}

// readmeSnippets returns the fenced blocks of the section under heading (a "## " heading, up to
// the next "## " heading outside a fenced block) that follow a line <!-- snippet: NAME -->
// (blank lines between them allowed), by NAME, each with the fence's indentation taken off its
// lines and ending in "\n". A marker not followed by a fenced block, a block not closed, or a
// NAME given twice is an error.
func readmeSnippets(path, heading string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	snippets := map[string]string{}
	var (
		in       bool   // inside the section
		pending  string // a marker's NAME waiting for its block
		markerAt int    // the pending marker's line
		fence    string // the open fence's marker, "" outside a fenced block
		name     string // the open block's NAME, "" if it is not a snippet
		indent   string // the open fence's indentation
		body     strings.Builder
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				if name != "" {
					snippets[name] = body.String()
				}
				fence, name = "", ""
				body.Reset()
			} else if name != "" {
				body.WriteString(strings.TrimPrefix(line, indent) + "\n")
			}
			continue
		}
		if strings.HasPrefix(line, "## ") {
			in = line == heading
			if pending != "" {
				return nil, fmt.Errorf("%s:%d: the snippet marker %q has no fenced block", path, markerAt, pending)
			}
			continue
		}
		if marker := fenceMarker(trimmed); marker != "" {
			fence = marker
			if in && pending != "" {
				name, pending = pending, ""
				indent = line[:len(line)-len(trimmed)]
			}
			continue
		}
		if !in || strings.TrimSpace(line) == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "<!-- snippet:"); ok {
			if pending != "" {
				return nil, fmt.Errorf("%s:%d: the snippet marker %q has no fenced block before the next marker", path, markerAt, pending)
			}
			pending, markerAt = strings.TrimSpace(strings.TrimSuffix(rest, "-->")), n
			if _, dup := snippets[pending]; dup {
				return nil, fmt.Errorf("%s:%d: a second snippet named %q", path, n, pending)
			}
			continue
		}
		if pending != "" {
			return nil, fmt.Errorf("%s:%d: the snippet marker %q is followed by %q, not a fenced block", path, markerAt, pending, strings.TrimSpace(line))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case pending != "":
		return nil, fmt.Errorf("%s:%d: the snippet marker %q has no fenced block", path, markerAt, pending)
	case fence != "":
		return nil, fmt.Errorf("%s: a fenced block (%s) is not closed", path, fence)
	}
	return snippets, nil
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestReadmeSnippetsTakesTheMarkedBlocksOfOneSection(t *testing.T) {
	for _, tc := range []struct {
		name, markdown string
		want           map[string]string
		wantErr        string
	}{
		{
			name:     "a marked block in a list item comes out without the item's indentation",
			markdown: "## A\n\n1. Step:\n\n   <!-- snippet: one -->\n   ```go\n   package main\n\n   \tfunc f() {}\n   ```\n",
			want:     map[string]string{"one": "package main\n\n\tfunc f() {}\n"},
		},
		{
			name:     "unmarked blocks and blocks of other sections are left out",
			markdown: "## B\n<!-- snippet: other -->\n```sh\nb\n```\n## A\n```sh\n## not a heading\n```\n<!-- snippet: one -->\n```sh\na\n```\n## C\n",
			want:     map[string]string{"one": "a\n"},
		},
		{
			name:     "a marker followed by prose is an error",
			markdown: "## A\n<!-- snippet: one -->\nprose\n```sh\na\n```\n",
			wantErr:  `the snippet marker "one" is followed by "prose", not a fenced block`,
		},
		{
			name:     "a marker at the end of the section is an error",
			markdown: "## A\n<!-- snippet: one -->\n## B\n",
			wantErr:  `the snippet marker "one" has no fenced block`,
		},
		{
			name:     "a name given twice is an error",
			markdown: "## A\n<!-- snippet: one -->\n```sh\na\n```\n<!-- snippet: one -->\n```sh\nb\n```\n",
			wantErr:  `a second snippet named "one"`,
		},
		{
			name:     "a block that is not closed is an error",
			markdown: "## A\n<!-- snippet: one -->\n```sh\na\n",
			wantErr:  "is not closed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "README.md")
			if err := os.WriteFile(path, []byte(tc.markdown), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readmeSnippets(path, "## A")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("snippets %q, want %q", got, tc.want)
			}
		})
	}
}
