package hooktest

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Exit codes of Main.
const (
	ExitOK      = 0 // every case passed
	ExitFailed  = 1 // a case failed
	ExitInvalid = 2 // a test file or its config is invalid, or no test file was found
)

// Main runs the test files found below paths (find, through the root opts.Root) and writes,
// like go test, one line per case (PASS/FAIL, with the reason and a diff under a failure) and a
// summary to w, or with junit a JUnit XML report; errors of invalid files go to errw. It
// returns the exit code.
func Main(ctx context.Context, paths []string, opts Options, junit bool, w, errw io.Writer) int {
	root, err := openRoot(opts.Root)
	if err != nil {
		fmt.Fprintf(errw, "synchook test: %v\n", err)
		return ExitInvalid
	}
	defer root.Close()
	files, err := root.find(paths)
	if err != nil {
		fmt.Fprintf(errw, "synchook test: %v\n", err)
		return ExitInvalid
	}
	if len(files) == 0 {
		fmt.Fprintf(errw, "synchook test: no %s (or *.%s) below %s\n", FileName, FileName, strings.Join(paths, ", "))
		return ExitInvalid
	}
	var all []Result
	invalid := false
	for _, path := range files {
		f, err := load(root, path)
		var rs []Result
		if err == nil {
			rs, err = RunFile(ctx, f, opts)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				err = fmt.Errorf("%s: %w", path, err)
			}
			fmt.Fprintf(errw, "synchook test: %v\n", err)
			invalid = true
			rs = []Result{{File: path, Case: "(file refused)", Refused: err.Error()}}
		}
		if !junit {
			for _, r := range rs {
				writeResult(w, r)
			}
		}
		all = append(all, rs...)
	}
	failed, skipped, refused := 0, 0, 0
	for _, r := range all {
		switch {
		case r.Refused != "":
			refused++
		case !r.Passed():
			failed++
		case r.Skipped != "":
			skipped++
		}
	}
	cases := len(all) - refused
	switch {
	case junit:
		writeJUnit(w, all)
	case refused > 0:
		fmt.Fprintf(w, "FAIL\t%s refused, %d of %d cases failed in %d files\n", plural(refused, "file"), failed, cases, len(files))
	case failed > 0:
		fmt.Fprintf(w, "FAIL\t%d of %d cases failed in %d files\n", failed, cases, len(files))
	default:
		fmt.Fprintf(w, "ok\t%d cases in %d files (%d files skipped)\n", cases-skipped, len(files), skipped)
	}
	switch {
	case invalid:
		return ExitInvalid
	case failed > 0:
		return ExitFailed
	}
	return ExitOK
}

// writeResult writes one case's line, and under a failure its reason and diff, indented.
func writeResult(w io.Writer, r Result) {
	switch {
	case r.Refused != "":
		fmt.Fprintf(w, "--- REFUSED: %s\n    %s\n", r.File, r.Refused)
		return
	case r.Skipped != "":
		fmt.Fprintf(w, "--- SKIP: %s: %s\n    %s\n", r.File, r.Case, r.Skipped)
		return
	case r.Updated:
		fmt.Fprintf(w, "--- UPDATED: %s: %s (%.2fs)\n", r.File, r.Case, r.Duration.Seconds())
		return
	}
	if r.Passed() {
		fmt.Fprintf(w, "--- PASS: %s: %s (%.2fs)\n", r.File, r.Case, r.Duration.Seconds())
		return
	}
	fmt.Fprintf(w, "--- FAIL: %s: %s (%.2fs)\n", r.File, r.Case, r.Duration.Seconds())
	for _, text := range []string{r.Failure, r.Diff} {
		for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if line != "" {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
}

// JUnit XML (the schema Jenkins, GitLab and GitHub's test reporters read).
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes results as JUnit XML, one testsuite per file.
func writeJUnit(w io.Writer, results []Result) {
	var out junitSuites
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.File]
		if !ok {
			i = len(out.Suites)
			index[r.File] = i
			out.Suites = append(out.Suites, junitSuite{Name: r.File})
		}
		s := &out.Suites[i]
		c := junitCase{Name: r.Case, ClassName: r.File, Time: seconds(r.Duration)}
		if r.Skipped != "" {
			c.Skipped = &junitSkipped{Message: r.Skipped}
		}
		switch {
		case r.Refused != "": // an invalid file or a config that would not start: an error, not a failure
			c.Error = &junitFailure{Message: firstLine(r.Refused), Text: r.Refused}
			s.Errors++
		case !r.Passed():
			c.Failure = &junitFailure{Message: firstLine(r.Failure), Text: r.Failure + "\n" + r.Diff}
			s.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	for i := range out.Suites {
		var total time.Duration
		for _, r := range results {
			if r.File == out.Suites[i].Name {
				total += r.Duration
			}
		}
		out.Suites[i].Time = seconds(total)
	}
	fmt.Fprint(w, xml.Header)
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	_ = enc.Encode(out)
	fmt.Fprintln(w)
}

// plural returns "1 file", "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
