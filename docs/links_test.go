package docs_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's top directory, seen from this package's directory.
const root = ".."

// TestMarkdownLinksNameFilesThatExist reads every Markdown file of the repository (README.md,
// CONTRIBUTING.md, BENCHMARKS.md, docs/*.md, examples/**/README.md, …) and fails for each
// relative link whose file or directory is missing, and for each #anchor into a Markdown file
// that has no such heading.
func TestMarkdownLinksNameFilesThatExist(t *testing.T) {
	files := markdownFiles(t, root)
	for _, want := range []string{"README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "docs/guarantees.md"} {
		if !slices.Contains(files, want) {
			t.Errorf("%s not found among the Markdown files %v", want, files)
		}
	}
	for _, file := range files {
		for _, problem := range checkFile(root, file) {
			t.Error(problem)
		}
	}
}

// TestReadmeFirstScreen keeps the README's promise to its three readers: its first screen (40
// lines) sends a vcluster user to plugin.yaml, a contributor to CONTRIBUTING.md, and shows the
// two commands (make run, make test) that the Makefile has.
func TestReadmeFirstScreen(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	screen := strings.Join(lines[:min(40, len(lines))], "\n")
	for _, want := range []string{"](plugin.yaml)", "](CONTRIBUTING.md)", "`make run`", "`make test`"} {
		if !strings.Contains(screen, want) {
			t.Errorf("README.md's first 40 lines do not contain %q", want)
		}
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"run", "test"} {
		if !regexp.MustCompile(`(?m)^` + target + `:`).Match(makefile) {
			t.Errorf("the Makefile has no target %q, which the README tells people to run", target)
		}
	}
}

// TestTheCheckFindsBrokenLinks proves the check on a small tree: a missing file, a missing
// anchor, a link out of the repository; and what it must accept.
func TestTheCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", strings.Join([]string{
		"# Title",
		"## `policy:` — MutatingAdmissionPolicy (CEL) hooks",
		"ok: [a](docs/a.md) [dir](docs) [anchor](docs/a.md#hooks-never-fight-the-syncer-automatic-undo)",
		"ok: [self](#policy--mutatingadmissionpolicy-cel-hooks) [web](https://example.com/x.md) [mail](mailto:a@b)",
		"ok: [`code` in text](docs/a.md#second-1) ![img](docs/a.md) `[not a link](missing-in-code.md)`",
		"bad: [gone](docs/missing.md) [bad anchor](docs/a.md#nope) [out](../outside.md) [self](#nope)",
		"```",
		"[in a fence](missing-in-fence.md)",
		"```",
		"[ref]: docs/also-missing.md",
	}, "\n"))
	write("docs/a.md", "# Hooks never fight the syncer: automatic undo\n## Second\n## Second\n")
	files := markdownFiles(t, dir)
	if want := []string{"README.md", "docs/a.md"}; !slices.Equal(files, want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	got := checkFile(dir, "README.md")
	want := []string{
		`README.md:6: link "docs/missing.md": no such file or directory docs/missing.md`,
		`README.md:6: link "docs/a.md#nope": docs/a.md has no heading with anchor "nope"`,
		`README.md:6: link "../outside.md": leads out of the repository`,
		`README.md:6: link "#nope": README.md has no heading with anchor "nope"`,
		`README.md:10: link "docs/also-missing.md": no such file or directory docs/also-missing.md`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Hooks never fight the syncer: automatic undo":        "hooks-never-fight-the-syncer-automatic-undo",
		"`policy:` — MutatingAdmissionPolicy (CEL) hooks":     "policy--mutatingadmissionpolicy-cel-hooks",
		"Which hook put this on my pod? Provenance":           "which-hook-put-this-on-my-pod-provenance",
		"Run it in [vcluster](https://vcluster.com) ≥ 0.20":   "run-it-in-vcluster--020",
		"What `make test` installs, and how long it takes":    "what-make-test-installs-and-how-long-it-takes",
		"snake_case and **bold** stay":                        "snake_case-and-bold-stay",
		"Tenant-proof undo (issue 19, 2026-11-24)":            "tenant-proof-undo-issue-19-2026-11-24",
		"Lists (`go test -run XXX -bench List1000 ./x/`, 5×)": "lists-go-test--run-xxx--bench-list1000-x-5",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// markdownFiles lists the *.md files under dir, slash-separated and relative to it, skipping
// hidden directories, bin/ (tools), testdata/ and vendor/.
func markdownFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

var (
	// inlineLink matches [text](target) and [text](target "title"), images too; the text may
	// hold brackets one level deep.
	inlineLink = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDefinition matches a reference-style link definition, [label]: target.
	refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// codeSpan matches an inline code span (a run of backticks, the code, the same run).
	codeSpan = regexp.MustCompile("(`+)[^`]*?(`+)")
	// scheme matches a URL with a scheme (https:, mailto:, …).
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// htmlAnchor matches <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// checkFile returns one message per broken link of the Markdown file rel (relative to dir).
func checkFile(dir, rel string) []string {
	links, err := linksOf(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", rel, err)}
	}
	var problems []string
	for _, l := range links {
		if msg := checkLink(dir, rel, l.target); msg != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", rel, l.line, l.target, msg))
		}
	}
	return problems
}

// checkLink says what is wrong with target, a link in the Markdown file rel, or "".
func checkLink(dir, rel, target string) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // another site: not this test's business
	}
	pathPart, anchor, _ := strings.Cut(target, "#")
	if p, err := url.PathUnescape(pathPart); err == nil {
		pathPart = p
	}
	dest := rel // a bare #anchor is into the file itself
	if pathPart != "" {
		if strings.HasPrefix(pathPart, "/") { // GitHub resolves /x from the repository's top
			dest = pathPart[1:]
		} else {
			dest = filepath.ToSlash(filepath.Join(filepath.Dir(rel), pathPart))
		}
		dest = filepath.ToSlash(filepath.Clean(dest))
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "leads out of the repository"
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(dest))); err != nil {
			return "no such file or directory " + dest
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return "" // anchors into source files (#L10) are GitHub's line numbers
	}
	anchors, err := anchorsOf(filepath.Join(dir, filepath.FromSlash(dest)))
	if err != nil {
		return err.Error()
	}
	if !anchors[anchor] {
		return fmt.Sprintf("%s has no heading with anchor %q", dest, anchor)
	}
	return ""
}

type link struct {
	line   int
	target string
}

// linksOf returns the link targets of a Markdown file, outside code blocks and code spans.
func linksOf(path string) ([]link, error) {
	var links []link
	err := eachProseLine(path, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, link{n, m[1]})
		}
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			links = append(links, link{n, m[1]})
		}
	})
	return links, err
}

// anchorsOf returns the anchors of a Markdown file's headings, as GitHub makes them (a repeated
// heading's anchor gets -1, -2, …), and of its <a id/name> tags.
func anchorsOf(path string) (map[string]bool, error) {
	anchors := map[string]bool{}
	seen := map[string]int{}
	heading := regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	err := eachProseLine(path, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	})
	return anchors, err
}

// slug is GitHub's anchor for a heading: the rendered text (link targets, backticks and
// emphasis marks dropped) in lower case, without punctuation other than '-' and '_', spaces
// turned into '-'.
func slug(heading string) string {
	text := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// eachProseLine calls fn with each line of the file (numbered from 1) that is not inside a
// fenced code block (``` or ~~~) and is not a fence itself.
func eachProseLine(path string, fn func(n int, line string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	fence := "" // the open fence's marker, "" outside a code block
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if marker := fenceMarker(trimmed); marker != "" {
			switch {
			case fence == "":
				fence = marker
				continue
			case strings.HasPrefix(marker, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, marker[:1])) == "":
				fence = ""
				continue
			}
		}
		if fence == "" {
			fn(n, line)
		}
	}
	return sc.Err()
}

// fenceMarker returns the run of ``` or ~~~ (three or more) a line starts with, or "".
func fenceMarker(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}
