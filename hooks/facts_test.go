package hooks

import (
	"strings"
	"testing"
)

// TestFacts holds the facts table to the hook types and to itself: every hook type has an
// entry and nothing else does, side and operation spell the type's wire string, and the read
// and Update pairs stay on the type's side.
func TestFacts(t *testing.T) {
	all := AllHookTypes()
	if len(facts) != len(all) {
		t.Errorf("facts has %d entries, AllHookTypes %d", len(facts), len(all))
	}
	for _, ht := range all {
		if _, ok := facts[ht]; !ok {
			t.Errorf("%s: no entry in facts", ht)
			continue
		}
		side, op := ht.Side(), ht.Op()
		if side != Physical && side != Virtual {
			t.Errorf("%s: side %q", ht, side)
		}
		if want := string(op) + strings.ToUpper(string(side[:1])) + string(side[1:]); string(ht) != want {
			t.Errorf("%s: side %q and op %q spell %s", ht, side, op, want)
		}
		if got := HookTypeOf(side, op); got != ht {
			t.Errorf("HookTypeOf(%s, %s) = %q, want %s", side, op, got, ht)
		}
		if ht.Reads() != (op == OpGet) {
			t.Errorf("%s: Reads() = %v with op %s", ht, ht.Reads(), op)
		}
		read, ok := ht.ReadOf()
		if stores := op == OpCreate || op == OpUpdate; ok != stores {
			t.Errorf("%s: ReadOf() ok = %v, want %v (only a Create or an Update stores what a read gives back)", ht, ok, stores)
		}
		if ok && (read.Side() != side || read.Op() != OpGet) {
			t.Errorf("%s: ReadOf() = %s, want the Get of side %s", ht, read, side)
		}
		if u := ht.UpdateOf(); u.Side() != side || u.Op() != OpUpdate {
			t.Errorf("%s: UpdateOf() = %s, want the Update of side %s", ht, u, side)
		}
	}
}

// TestFactsUnknown: a string that is no hook type has no facts.
func TestFactsUnknown(t *testing.T) {
	for _, ht := range []HookType{"", "GetPhysicalX", "createPhysical"} {
		if ht.Side() != "" || ht.Op() != "" || ht.Reads() || ht.UpdateOf() != "" {
			t.Errorf("%q: facts %q %q %v %q", ht, ht.Side(), ht.Op(), ht.Reads(), ht.UpdateOf())
		}
		if read, ok := ht.ReadOf(); ok {
			t.Errorf("%q: ReadOf() = %s", ht, read)
		}
	}
	if got := HookTypeOf("Physical", OpGet); got != "" {
		t.Errorf(`HookTypeOf("Physical", OpGet) = %q, want ""`, got)
	}
	if got := HookTypeOf(Virtual, "Patch"); got != "" {
		t.Errorf(`HookTypeOf(Virtual, "Patch") = %q, want ""`, got)
	}
}
