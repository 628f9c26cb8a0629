package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
)

// undoKeyOptions are the flags of `synchook undo-key`.
type undoKeyOptions struct {
	// rotate is the ring file to rotate ("": a new ring).
	rotate string
	// output is the file to write the ring to ("": stdout).
	output string
}

// runUndoKey prints a new undo key ring (one key), or with o.rotate the ring in that file
// followed by a new key, which seals from then on while the older keys still open what they
// sealed. The output is the ring text --undo-key-file reads, on stdout or, with o.output, in
// that file (undokey.WriteFile: 0600, replaced atomically, so `--rotate keys -o keys` rotates
// in place). Nothing else is printed on stdout: the output is a secret. When the --rotate file
// cannot be read, is empty or does not parse, nothing is written and it exits exitFailed with
// a message naming the file (and, for an empty one, the shell redirect that empties it).
func runUndoKey(o undoKeyOptions, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "synchook undo-key: "+format+"\n", a...)
		return exitFailed
	}
	var (
		ring *undo.Ring
		err  error
	)
	if o.rotate != "" {
		var data []byte
		if data, err = os.ReadFile(o.rotate); err != nil {
			return fail("--rotate %s: %v", o.rotate, cause(err))
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return fail("--rotate %s: the file is empty (a shell redirect into the same file, `> %s`, truncates it before synchook reads it: use -o %s); nothing written", o.rotate, o.rotate, o.rotate)
		}
		if !holdsKey(data) {
			return fail("--rotate %s: the file holds no key, only blank lines and comments; nothing written", o.rotate)
		}
		if ring, err = undo.ParseRing(data); err != nil {
			return fail("--rotate %s: %v; nothing written", o.rotate, err)
		}
		ring, err = ring.Rotate()
	} else {
		ring, err = undo.GenerateRing()
	}
	if err != nil {
		return fail("%v", err)
	}
	if o.output != "" {
		if err := undokey.WriteFile(o.output, ring); err != nil {
			return fail("%v", err)
		}
		return exitOK
	}
	text, err := ring.MarshalText()
	if err != nil {
		return fail("%v", err)
	}
	_, _ = stdout.Write(text)
	return exitOK
}

// holdsKey reports whether a key ring text has a line that is neither blank nor a comment.
func holdsKey(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			return true
		}
	}
	return false
}

// cause is the error inside a *fs.PathError (its Op and Path, which the message names
// already, left out), else err.
func cause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
