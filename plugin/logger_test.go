package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestServeLoggerHonoursTheZapFlags: the JSON logger of serve (not --zap-devel) writes as the
// --zap-* flags say, with controller-runtime's production defaults where they say nothing.
func TestServeLoggerHonoursTheZapFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flags     []string
		stack     bool // an error line carries a stacktrace
		numericTS bool // ts is a number (epoch), not an RFC 3339 string
		debug     bool // a V(1) line is written
	}{
		{name: "no flags: info, stack traces on errors, RFC 3339 times", stack: true},
		{name: "--zap-stacktrace-level=panic drops the error's stack trace", flags: []string{"--zap-stacktrace-level=panic"}},
		{name: "--zap-time-encoding=epoch writes seconds", flags: []string{"--zap-time-encoding=epoch"}, stack: true, numericTS: true},
		{name: "--zap-log-level=debug writes V(1)", flags: []string{"--zap-log-level=debug"}, stack: true, debug: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &zap.Options{}
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tc.flags); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			log := newLogger(o, &out)
			log.V(1).Info("debug line")
			log.Error(errors.New("boom"), "error line")
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if got := strings.Contains(out.String(), "debug line"); got != tc.debug {
				t.Errorf("debug line written: %v, want %v:\n%s", got, tc.debug, out.String())
			}
			var last map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
				t.Fatalf("not a JSON line: %v\n%s", err, out.String())
			}
			if _, got := last["stacktrace"]; got != tc.stack {
				t.Errorf("stacktrace present: %v, want %v: %v", got, tc.stack, last)
			}
			if _, got := last["ts"].(float64); got != tc.numericTS {
				t.Errorf("ts %v (%T): numeric %v, want %v", last["ts"], last["ts"], got, tc.numericTS)
			}
		})
	}
}
