package patch

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestDiffIsTheSizeOfTheChange is the property behind linear diffs (issue 25): for arrays of
// N elements (N up to 2,000, elements drawn from a small alphabet so that neighbours repeat)
// with one element inserted or removed anywhere, or one element replaced, Diff gives one
// operation whatever N and the index, and applying it gives the mutated document.
func TestDiffIsTheSizeOfTheChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 1 + rng.IntN(2000)
		a := make([]any, n)
		for i := range a {
			a[i] = map[string]any{"key": fmt.Sprintf("k%d", rng.IntN(5)), "v": rng.IntN(3)}
		}
		b := append([]any(nil), a...)
		i := rng.IntN(n)
		var change string
		switch rng.IntN(3) {
		case 0:
			change, b = "insert", append(b[:i:i], append([]any{map[string]any{"key": "new"}}, b[i:]...)...)
		case 1:
			change, b = "remove", append(b[:i:i], b[i+1:]...)
		default:
			change = "replace"
			b[i] = map[string]any{"key": "replaced"}
		}
		before, _ := json.Marshal(map[string]any{"spec": map[string]any{"tolerations": a}})
		after, _ := json.Marshal(map[string]any{"spec": map[string]any{"tolerations": b}})
		ops, err := Diff(before, after)
		if err != nil {
			t.Fatal(err)
		}
		// A replace of an object element is a diff inside it: at most its members.
		if limit := map[string]int{"insert": 1, "remove": 1, "replace": 3}[change]; len(ops) > limit {
			t.Fatalf("round %d: %s at %d of %d: %d operations, want at most %d", round, change, i, n, len(ops), limit)
		}
		p, err := Marshal(ops)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Apply(before, p)
		if err != nil {
			t.Fatal(err)
		}
		var x, y any
		_ = json.Unmarshal(got, &x)
		_ = json.Unmarshal(after, &y)
		if fmt.Sprint(x) != fmt.Sprint(y) {
			t.Fatalf("round %d: %s at %d of %d: the patch does not give the mutated document", round, change, i, n)
		}
	}
}
