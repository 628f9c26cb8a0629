package jsonscan_test

import (
	"bytes"
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
