package jsonscan_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/jsonscan"
)

// pointers returns the JSON Pointer of every value in the valid document doc (RFC 6901 escapes
// applied), with its unescaped tokens, plus for every container a pointer that names nothing.
func pointers(doc []byte, ptr string, tokens []string, out *[]pointerCase) {
	*out = append(*out, pointerCase{ptr, append([]string(nil), tokens...)})
	doc = bytes.TrimSpace(doc)
	if ms, ok := jsonscan.Members(doc); ok {
		for _, m := range ms {
			esc := strings.ReplaceAll(strings.ReplaceAll(m.Key, "~", "~0"), "/", "~1")
			pointers(m.Value, ptr+"/"+esc, append(tokens, m.Key), out)
		}
		*out = append(*out, pointerCase{ptr + "/no~0such", append(append([]string(nil), tokens...), "no~such")})
	} else if els, ok := jsonscan.Elements(doc); ok {
		for i, e := range els {
			pointers(e, ptr+"/"+strconv.Itoa(i), append(tokens, strconv.Itoa(i)), out)
		}
		n := strconv.Itoa(len(els))
		*out = append(*out, pointerCase{ptr + "/" + n, append(append([]string(nil), tokens...), n)}, pointerCase{ptr + "/01", nil})
	}
}

type pointerCase struct {
	ptr    string
	tokens []string // nil for a pointer no document has a value at
}

// checkIndex checks that one Index answers every pointer of doc, in document order and then
// in reverse (so containers are split before and after their children are asked for), as
// Lookup does for the same tokens.
func checkIndex(t *testing.T, doc []byte) {
	t.Helper()
	var cases []pointerCase
	pointers(doc, "", nil, &cases)
	x := jsonscan.NewIndex(doc)
	for pass := range 2 {
		for i := range cases {
			c := cases[i]
			if pass == 1 {
				c = cases[len(cases)-1-i]
			}
			got, gotOK := x.Lookup(c.ptr)
			var want []byte
			wantOK := false
			if c.tokens != nil || c.ptr == "" {
				want, wantOK = jsonscan.Lookup(doc, c.tokens)
			}
			if gotOK != wantOK || !bytes.Equal(got, want) {
				t.Fatalf("%s: Index.Lookup(%q) = %q, %v; Lookup(%q) = %q, %v", doc, c.ptr, got, gotOK, c.tokens, want, wantOK)
			}
		}
	}
}

func TestIndexAgreesWithLookup(t *testing.T) {
	for _, doc := range []string{
		`{}`, `[]`, `"x"`, `{"a":{"b":[1,{"c/d":2,"e~f":[3]}]},"":{"":4}}`,
		` [ {"a":1} , [ [] , {} ] , null ] `, `{"a":1,"a":{"b":2}}`,
	} {
		checkIndex(t, []byte(doc))
	}
}

func TestIndexLookupUniqueRefusesRepeatedKeys(t *testing.T) {
	x := jsonscan.NewIndex([]byte(`{"a":{"b":1},"a":{"b":2,"c":3},"d":{"e":4,"e":5},"f":[6]}`))
	for ptr, want := range map[string]bool{"/a": false, "/a/b": false, "/a/c": false, "/d": true, "/d/e": false, "/f/0": true, "": true} {
		if _, ok := x.LookupUnique(ptr); ok != want {
			t.Errorf("LookupUnique(%q) ok = %v, want %v", ptr, ok, want)
		}
	}
	if v, ok := x.Lookup("/a/b"); !ok || string(v) != "2" {
		t.Errorf(`Lookup("/a/b") = %s, %v; want the last member's 2`, v, ok)
	}
	for _, bad := range []string{"a", "/~2", "/a~", "/f/-", "/f/00"} {
		if v, ok := x.Lookup(bad); ok {
			t.Errorf("Lookup(%q) = %s, want none", bad, v)
		}
	}
}

func TestJoinEscapesTheTokenAsPointerDoes(t *testing.T) {
	for _, tok := range []string{"app", "synchook.io/undo", "a~b", "~1/", ""} {
		want := jsonscan.Pointer([]string{"metadata", "labels", tok})
		if got := jsonscan.Join("/metadata/labels", tok); got != want {
			t.Errorf("jsonscan.Join(%q) = %q, want %q", tok, got, want)
		}
		if back, ok := jsonscan.UnescapeToken(jsonscan.Join("", tok)[1:]); !ok || back != tok {
			t.Errorf("jsonscan.Join(%q) does not unescape back: %q, %v", tok, back, ok)
		}
	}
}
