package intake

import (
	"bytes"
	"testing"
	"unicode"
)

// FuzzFoldKey checks that two names have the same fold key exactly when bytes.EqualFold (the
// matching encoding/json does) takes them for the same.
func FuzzFoldKey(f *testing.F) {
	for _, s := range [][2]string{
		{"labels", "Labels"},
		{"labels", "labelſ"},
		{"kind", "\u212aind"},
		{"metadata", "METADATA"},
		{"a", "b"},
		{"\xff", "\ufffd"},
		{"ǅ", "ǆ"},
		{"Σ", "ς"},
		{"", ""},
		{"spec", "spec "},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		same := bytes.Equal(foldKey(nil, []byte(a)), foldKey(nil, []byte(b)))
		if want := bytes.EqualFold([]byte(a), []byte(b)); same != want {
			t.Fatalf("fold keys of %q and %q equal: %v; bytes.EqualFold %v", a, b, same, want)
		}
	})
}

func TestFoldKeyTakesEveryRuneToItsOrbitsSmallest(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.SimpleFold(r) == r {
			continue // a rune that folds to nothing else is its own key
		}
		key := string(foldKey(nil, []byte(string(r))))
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if got := string(foldKey(nil, []byte(string(f)))); got != key {
				t.Fatalf("fold key of %q is %q, of %q (same orbit) %q", r, key, f, got)
			}
			if []rune(key)[0] > f {
				t.Fatalf("fold key of %q is %q, above %q of its orbit", r, key, f)
			}
		}
	}
}
