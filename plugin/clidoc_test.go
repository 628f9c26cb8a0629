package plugin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra/doc"
)

var updateCLIDocs = flag.Bool("update", false, "regenerate docs/cli/ from the command tree (TestCLIReferenceIsGeneratedFromTheCommands)")

// cliDocsDir is the committed command reference, one Markdown page per command.
const cliDocsDir = "../docs/cli"

// genCLIDocs writes the reference of every command into dir with cobra's doc generator, for a
// Plugin without Go hooks and an empty environment (the defaults the docs show).
func genCLIDocs(t *testing.T, dir string) {
	t.Helper()
	p := New()
	p.Getenv = func(string) string { return "" }
	var out bytes.Buffer
	root := p.newRootCommand(strings.NewReader(""), &out, &out)
	root.DisableAutoGenTag = true // no date line: the pages are compared
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		t.Fatal(err)
	}
}

// TestCLIReferenceIsGeneratedFromTheCommands regenerates docs/cli/ into a temp dir and compares
// it with the committed pages: a flag, a help text or a command changed without regenerating
// (go test ./plugin/ -run TestCLIReferenceIsGeneratedFromTheCommands -update) fails here.
func TestCLIReferenceIsGeneratedFromTheCommands(t *testing.T) {
	dir := t.TempDir()
	genCLIDocs(t, dir)
	if *updateCLIDocs {
		old, _ := filepath.Glob(filepath.Join(cliDocsDir, "synchook*.md"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(cliDocsDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	generated, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no page generated (%v)", err)
	}
	names := map[string]bool{}
	for _, path := range generated {
		name := filepath.Base(path)
		names[name] = true
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		committed := filepath.Join(cliDocsDir, name)
		if *updateCLIDocs {
			if err := os.WriteFile(committed, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(committed)
		switch {
		case err != nil:
			t.Errorf("docs/cli/%s: %v (run go test ./plugin/ -run TestCLIReferenceIsGeneratedFromTheCommands -update)", name, err)
		case !bytes.Equal(got, want):
			t.Errorf("docs/cli/%s differs from the command's help (run go test ./plugin/ -run TestCLIReferenceIsGeneratedFromTheCommands -update):\n%s", name, firstDifference(string(got), string(want)))
		}
	}
	committed, _ := filepath.Glob(filepath.Join(cliDocsDir, "synchook*.md"))
	for _, path := range committed {
		if !names[filepath.Base(path)] {
			t.Errorf("docs/cli/%s: no such command any more (run with -update)", filepath.Base(path))
		}
	}
}

// firstDifference shows the first line where the committed text got and the generated want
// differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  committed: " + gl + "\n  generated: " + wl
		}
	}
	return ""
}
