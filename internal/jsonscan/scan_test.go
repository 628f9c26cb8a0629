package jsonscan_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/synchook/synchook/internal/jsonscan"
)

// checkEachMember checks that EachMember reports what Members found in doc: ok alike, the same
// members in the same order, each key literal decoding to the member's key.
func checkEachMember(t *testing.T, doc []byte, ms []jsonscan.Member, isObject bool) {
	t.Helper()
	var i int
	ok := jsonscan.EachMember(doc, func(key, value []byte) bool {
		if i >= len(ms) {
			t.Fatalf("%q: EachMember gives more members than Members (%d)", doc, len(ms))
		}
		if k, _ := jsonscan.String(key); k != ms[i].Key || !bytes.Equal(value, ms[i].Value) {
			t.Fatalf("%q: member %d is %s: %q, Members %q: %q", doc, i, key, value, ms[i].Key, ms[i].Value)
		}
		i++
		return true
	})
	if ok != isObject || i != len(ms) {
		t.Fatalf("%q: EachMember ok=%v with %d members, Members ok=%v with %d", doc, ok, i, isObject, len(ms))
	}
}

// flatten lists the members of the object doc and of every object nested in its member values
// (not inside arrays), depth first, as "path=value": with ScanObject reading nested objects on
// the way (scan) or with Members over each value again.
func flatten(doc []byte, scan bool) (out []string, end int) {
	var walk func(prefix string, obj []byte) int
	walk = func(prefix string, obj []byte) int {
		if !scan {
			ms, ok := jsonscan.Members(obj)
			if !ok {
				return -1
			}
			for _, m := range ms {
				out = append(out, prefix+m.Key+"="+string(m.Value))
				walk(prefix+m.Key+".", m.Value)
			}
			return jsonscan.SkipValue(obj, bytes.IndexByte(obj, '{'))
		}
		return jsonscan.ScanObject(obj, func(key, rest []byte) int {
			k, _ := jsonscan.String(key)
			n := jsonscan.SkipValue(rest, 0)
			out = append(out, prefix+k+"="+string(rest[:n]))
			if m := walk(prefix+k+".", rest); m >= 0 && m != n {
				out = append(out, fmt.Sprintf("%s%s: ScanObject length %d, SkipValue %d", prefix, k, m, n))
			}
			return n
		})
	}
	end = walk("", doc)
	return out, end
}

// checkScanObject checks that ScanObject, reading nested objects on the way, finds the members
// that Members finds level by level, and ends the object where SkipValue does.
func checkScanObject(t *testing.T, doc []byte) {
	t.Helper()
	want, wantEnd := flatten(doc, false)
	got, end := flatten(doc, true)
	if len(got) != len(want) || (wantEnd >= 0) != (end >= 0) || wantEnd >= 0 && end != wantEnd {
		t.Fatalf("%q: ScanObject %q ending at %d, Members %q ending at %d", doc, got, end, want, wantEnd)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%q: ScanObject %q, Members %q", doc, got[i], want[i])
		}
	}
}

func TestScanObject(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		end  int
	}{
		{"an empty object ends at its brace", ` {} `, 3},
		{"nested objects are read on the way", `{"a":{"b":{"c":1},"d":[{"e":2}]},"f":"}"}`, 41},
		{"repeated keys are all read", `{"a":{"x":1},"a":{"x":2}}`, 25},
		{"an array is no object", `[{}]`, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			skip := func(_, rest []byte) int { return jsonscan.SkipValue(rest, 0) }
			if end := jsonscan.ScanObject([]byte(tc.doc), skip); end != tc.end {
				t.Errorf("ScanObject(%s) = %d, want %d", tc.doc, end, tc.end)
			}
			checkScanObject(t, []byte(tc.doc))
		})
	}
	t.Run("a negative length stops the scan", func(t *testing.T) {
		n := 0
		end := jsonscan.ScanObject([]byte(`{"a":1,"b":2}`), func(_, _ []byte) int { n++; return -1 })
		if end != -1 || n != 1 {
			t.Errorf("ScanObject = %d after %d members, want -1 after 1", end, n)
		}
	})
}

func TestEachMember(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		stop int // fn returns false at this member (0: never)
		want []string
		ok   bool
	}{
		{"an empty object has no members", ` { } `, 0, nil, true},
		{"members come in document order with their literals and trimmed values", `{"b" : 1 ,"a":{"x":[2]}}`, 0, []string{`"b"=1`, `"a"={"x":[2]}`}, true},
		{"a repeated key is reported each time", `{"a":1,"a":2}`, 0, []string{`"a"=1`, `"a"=2`}, true},
		{"keys keep their escapes", `{"\u0061":"v"}`, 0, []string{`"\u0061"="v"`}, true},
		{"it stops where fn says", `{"a":1,"b":2,"c":3}`, 2, []string{`"a"=1`, `"b"=2`}, true},
		{"an array is not an object", `[{"a":1}]`, 0, nil, false},
		{"a string is not an object", `"{}"`, 0, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			ok := jsonscan.EachMember([]byte(tc.doc), func(key, value []byte) bool {
				got = append(got, string(key)+"="+string(value))
				return len(got) != tc.stop
			})
			if ok != tc.ok || len(got) != len(tc.want) {
				t.Fatalf("EachMember(%s) = %v, %q; want %v, %q", tc.doc, ok, got, tc.ok, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("member %d = %s, want %s", i, got[i], tc.want[i])
				}
			}
			ms, isObject := jsonscan.Members([]byte(tc.doc))
			if tc.stop == 0 {
				checkEachMember(t, []byte(tc.doc), ms, isObject)
			}
		})
	}
}

func TestEachMemberAllocatesNothing(t *testing.T) {
	doc := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}},"spec":{}}`)
	n := 0
	count := func(key, value []byte) bool { n++; return true }
	if allocs := testing.AllocsPerRun(100, func() { jsonscan.EachMember(doc, count) }); allocs != 0 {
		t.Errorf("EachMember allocates %.0f times per call, want 0", allocs)
	}
}

func TestPlainText(t *testing.T) {
	cases := []struct {
		name  string
		lit   string
		want  string
		plain bool
	}{
		{"printable ASCII is its own text", `"metadata"`, "metadata", true},
		{"the empty string is plain", `""`, "", true},
		{"an escape is not plain", `"a\u0062"`, "", false},
		{"a backslash escape is not plain", `"a\"b"`, "", false},
		{"non-ASCII text is not plain", `"é"`, "", false},
		{"text without quotes is no literal", `abc`, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, plain := jsonscan.PlainText([]byte(tc.lit))
			if plain != tc.plain || string(text) != tc.want {
				t.Errorf("PlainText(%s) = %q, %v; want %q, %v", tc.lit, text, plain, tc.want, tc.plain)
			}
			if s, ok := jsonscan.String([]byte(tc.lit)); plain && (!ok || s != string(text)) {
				t.Errorf("String(%s) = %q, %v; PlainText %q", tc.lit, s, ok, text)
			}
		})
	}
}
