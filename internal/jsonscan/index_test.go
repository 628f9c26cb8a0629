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

// checkMembers checks, on one Index of doc (given held: every unique object that is a member
// of an object held, as a scan that read them would hold them), that Member answers for every pointer of doc what Find
// answers in Lookup's value of its parent, before and after a walk or a split read it, and
// that Known, wherever it knows, answers what LookupUnique answers on a fresh Index.
func checkMembers(t *testing.T, doc []byte, held bool) {
	t.Helper()
	var cases []pointerCase
	pointers(doc, "", nil, &cases)
	x := jsonscan.NewIndex(doc)
	if held {
		for _, c := range cases {
			if len(c.tokens) == 0 {
				continue
			}
			parent, _ := jsonscan.Lookup(doc, c.tokens[:len(c.tokens)-1])
			if v, ok := jsonscan.NewIndex(doc).LookupUnique(c.ptr); ok && v[0] == '{' && parent[0] == '{' {
				x.Hold(c.ptr, v)
			}
		}
	}
	for pass := range 3 { // read by a walk, asked again, then with every parent split
		for _, c := range cases {
			if len(c.tokens) == 0 {
				continue
			}
			parent, key := c.ptr[:strings.LastIndexByte(c.ptr, '/')], c.tokens[len(c.tokens)-1]
			if pass == 2 {
				x.Lookup(parent + "/x")
			}
			value, count, _, ok := x.Member(parent, key, pass != 1)
			if !ok && pass == 1 {
				continue // a member no walk read: Member says so
			}
			var want []byte
			wantCount := 0
			if p, found := jsonscan.Lookup(doc, c.tokens[:len(c.tokens)-1]); found {
				m, n, _ := jsonscan.Find(p, key)
				want, wantCount = m.Value, n
			}
			if !ok || count != wantCount || !bytes.Equal(value, want) {
				t.Fatalf("%s, pass %d: Member(%q, %q) = %q, %d, %v; want %q, %d", doc, pass, parent, key, value, count, ok, want, wantCount)
			}
			got, gotOK, known := x.Known(c.ptr)
			if want, wantOK := jsonscan.NewIndex(doc).LookupUnique(c.ptr); known && (gotOK != wantOK || !bytes.Equal(got, want)) {
				t.Fatalf("%s, pass %d: Known(%q) = %q, %v; LookupUnique = %q, %v", doc, pass, c.ptr, got, gotOK, want, wantOK)
			}
		}
	}
}

func TestIndexMemberAndKnownAgreeWithLookup(t *testing.T) {
	for _, doc := range []string{
		`{}`, `[]`, `"x"`, `{"a":{"b":[1,{"c/d":2,"e~f":[3]}]},"":{"":4}}`,
		` [ {"a":1} , [ [] , {} ] , null ] `, `{"a":1,"a":{"b":2}}`,
		`{"metadata":{"annotations":{"x":"1","x":"2"},"labels":null},"sp\u0065c":{"a\/b":{}}}`,
		`{"a":{"b":{"c":1}},"a":{"b":{"d":2}}}`,
	} {
		for _, held := range []bool{false, true} {
			name := "in " + doc + " answers as Lookup and Find"
			if held {
				name += " with its objects held"
			}
			t.Run(name, func(t *testing.T) { checkMembers(t, []byte(doc), held) })
		}
	}
}
