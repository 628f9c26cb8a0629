// Package canary is for tests that a Secret value leaves synchook in no form: it expands a
// canary value into every encoding in which a hook's message, a panic, a log line or a file
// could carry it (Forms), looks for all of them in an output (Check), and gives a zap logger
// at the highest verbosity that writes into a buffer (Logger), so that log output can be
// searched too.
package canary

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Value is a canary Secret value: it holds a double quote, so that its Go-quoted (%q) and
// JSON forms differ from it.
const Value = `s3cr3t-canary"quote`

// Form is one encoding of a canary value.
type Form struct {
	// Name says what the encoding is, e.g. "base64 (standard)" or "Go-quoted (%q) in JSON".
	Name string
	// Text is the value so encoded (without surrounding quotes or brackets, so that it is
	// found inside a larger printed value too).
	Text string
}

// Forms returns every form of v that a leak could take: v as it is, base64 (standard, URL,
// and both unpadded), hex (lower and upper case, as %x and %X print it), Go-quoted (as %q
// prints it), decimal bytes (as %v prints a []byte, also inside a printed *corev1.Secret), Go
// syntax bytes (as %#v prints a []byte, also inside a %#v of a Secret) and its unkeyed SHA-256
// in hex; and each of those again as it appears inside a JSON string or a
// Go-quoted string (one or two levels deep: a quoted message inside a JSON log line or
// response), without repeats.
func Forms(v string) []Form {
	b := []byte(v)
	sum := sha256.Sum256(b)
	base := []Form{
		{"raw", v},
		{"base64 (standard)", base64.StdEncoding.EncodeToString(b)},
		{"base64 (URL)", base64.URLEncoding.EncodeToString(b)},
		{"base64 (standard, unpadded)", base64.RawStdEncoding.EncodeToString(b)},
		{"base64 (URL, unpadded)", base64.RawURLEncoding.EncodeToString(b)},
		{"hex (%x)", fmt.Sprintf("%x", b)},
		{"hex (%X)", fmt.Sprintf("%X", b)},
		{"Go-quoted (%q)", quoted(v)},
		{"decimal bytes (%v of a []byte)", strings.Trim(fmt.Sprint(b), "[]")}, //nolint:staticcheck // the decimal form is the point
		{"Go syntax bytes (%#v of a []byte)", strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%#v", b), "[]byte{"), "}")},
		{"unkeyed SHA-256", hex.EncodeToString(sum[:])},
	}
	wraps := []struct {
		name string
		fn   func(string) string
	}{
		{"in a Go-quoted string", quoted},
		{"in a JSON string", jsonString},
	}
	var out []Form
	seen := map[string]bool{}
	add := func(f Form) {
		if !seen[f.Text] {
			seen[f.Text] = true
			out = append(out, f)
		}
	}
	for _, f := range base {
		add(f)
		for _, w := range wraps {
			once := Form{f.Name + " " + w.name, w.fn(f.Text)}
			add(once)
			for _, w2 := range wraps {
				add(Form{once.Name + " " + w2.name, w2.fn(once.Text)})
			}
		}
	}
	return out
}

// quoted returns s as %q prints it, without the quotes.
func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// jsonString returns s as a JSON string holds it, without the quotes.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// Find returns the names of the forms of v (Forms) that occur in text.
func Find(text, v string) []string {
	var found []string
	for _, f := range Forms(v) {
		if strings.Contains(text, f.Text) {
			found = append(found, f.Name)
		}
	}
	return found
}

// Check fails t for each form of v found in text, naming where the text came from (e.g. "the
// admission response").
func Check(t testing.TB, where, text, v string) {
	t.Helper()
	if found := Find(text, v); len(found) > 0 {
		t.Errorf("the Secret value leaks into %s as: %s\n%s", where, strings.Join(found, "; "), text)
	}
}

// Buffer is a bytes.Buffer safe for concurrent use: log lines come from many goroutines.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a logr.Logger that writes JSON lines to w through zap, as synchook's own
// logger does, with every verbosity enabled (V(127) included).
func Logger(w io.Writer) logr.Logger {
	cfg := zap.NewProductionEncoderConfig()
	core := zapcore.NewCore(zapcore.NewJSONEncoder(cfg), zapcore.AddSync(w), zapcore.Level(-127))
	return zapr.NewLogger(zap.New(core))
}

// Contains reports whether text holds at least one of the forms of v: for tests that check
// their own search would have found a leak.
func Contains(text, v string) bool {
	return slices.ContainsFunc(Forms(v), func(f Form) bool { return strings.Contains(text, f.Text) })
}
