package plugin

import (
	"runtime/debug"
	"testing"
)

// TestGCPercent checks that a plugin v2 process takes DefaultGCPercent unless GOGC is set.
func TestGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	setGCPercent(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("no GOGC: GC percent %d, want %d", got, DefaultGCPercent)
	}
	setGCPercent(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100 in the environment: GC percent %d, want the runtime's 100 left alone", got)
	}
}
