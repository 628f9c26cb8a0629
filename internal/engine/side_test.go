package engine

import (
	"testing"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
)

// TestSideNames: the engine converts between hooks.Side and undo.Side by type conversion
// (sideOf, and back where a sealed kind's side picks its read type), so their strings must match.
func TestSideNames(t *testing.T) {
	for h, u := range map[hooks.Side]undo.Side{hooks.Physical: undo.Physical, hooks.Virtual: undo.Virtual} {
		if string(h) != string(u) {
			t.Errorf("hooks.Side %q is undo.Side %q", h, u)
		}
	}
	for _, ht := range hooks.AllHookTypes() {
		if side := sideOf(ht); side != undo.Physical && side != undo.Virtual {
			t.Errorf("sideOf(%s) = %q", ht, side)
		}
	}
}
