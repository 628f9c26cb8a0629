package answer

import (
	"encoding/json"
	"testing"
)

// TestScannedKeysMatchAsEncodingJSONDecodesThem: a member's key literal is the name that
// encoding/json decodes it to (the oracle), however it is written, for any name an
// operation's path gives.
func TestScannedKeysMatchAsEncodingJSONDecodesThem(t *testing.T) {
	for _, tc := range []struct{ name, lit, key string }{
		{"the same plain text", `"app"`, "app"},
		{"another plain text of the same length", `"apq"`, "app"},
		{"a longer plain text", `"appx"`, "app"},
		{"a shorter plain text", `"ap"`, "app"},
		{"an escaped letter", `"\u0061pp"`, "app"},
		{"an escaped slash", `"a\/b"`, "a/b"},
		{"an escaped backslash", `"a\\b"`, `a\b`},
		{"a backslash not escaped in the name's length", `"a\\"`, `a\\`},
		{"an escaped quote", `"a\"b"`, `a"b`},
		{"non-ASCII text as written", `"é"`, "é"},
		{"non-ASCII text escaped", `"\u00e9"`, "é"},
		{"invalid UTF-8, which decodes to U+FFFD", "\"\xff\"", "\uFFFD"},
		{"invalid UTF-8 against itself", "\"\xff\"", "\xff"},
		{"an escape that decodes to another name", `"\u0061pq"`, "app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var decoded string
			if err := json.Unmarshal([]byte(tc.lit), &decoded); err != nil {
				t.Fatal(err)
			}
			raw := []byte(`{` + tc.lit + `:1}`)
			sc := scans{source: &source{raw: raw}}
			sc, _ = sc.scan(nil, "")
			o, ok := sc.object(0)
			if !ok || o.n != 1 {
				t.Fatalf("scanned %+v, want the one member of %s", sc.members, raw)
			}
			_, count := sc.member(o, tc.key)
			if got, want := count == 1, decoded == tc.key; got != want {
				t.Errorf("%s is %q: %v, want %v (encoding/json decodes it to %q)", tc.lit, tc.key, got, want, decoded)
			}
		})
	}
}
