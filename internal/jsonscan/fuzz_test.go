package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/synchook/synchook/internal/jsonscan"
)

// checkString checks String on the string literal lit against encoding/json.
func checkString(t *testing.T, lit []byte) {
	t.Helper()
	var want string
	if err := json.Unmarshal(lit, &want); err != nil {
		t.Fatal(err)
	}
	if got, ok := jsonscan.String(lit); !ok || got != want {
		t.Fatalf("String(%s) = %q, %v; encoding/json %q", lit, got, ok, want)
	}
}

// FuzzScan checks Members, EachMember, ScanObject, Find, Elements and String against encoding/json on every valid document
// (and Index against Lookup at every pointer of it, its Member against Find and its Known
// against LookupUnique, with objects held and without):
// the same keys and values in the same order (the last of repeated keys is what Unmarshal
// keeps), offsets that cut out exactly the member, and never a panic on invalid input.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, ` { "a" : 1 , "b":[true,null,{"c":"\"}"}] } `, `{"a":1,"a":2}`, `["x",{"y":[]},-1.5e3]`,
		`{"\u00e9":"\ud83d\ude00","k\"ey":{}}`, `"str"`, `"a\u0000\tb\"\\\/"`, `"\xff"`, "\"\xff\"", `{"a":1,"a":2,}`, `01`, `1.`, `-0e+1`, `"\ud800"`, `12`, `{"a":`, `[1,`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		ms, isObject := jsonscan.Members(doc)
		checkEachMember(t, doc, ms, isObject) // on invalid input too: the same members, no panic
		if !jsonscan.Valid(doc) {
			flatten(doc, true) // any answer, no panic
		} else {
			checkScanObject(t, doc)
			checkIndex(t, doc)
			checkMembers(t, doc, false)
			checkMembers(t, doc, true)
		}
		els, isArray := jsonscan.Elements(doc)
		str, isString := jsonscan.String(bytes.TrimSpace(doc))
		if valid := json.Valid(doc); jsonscan.Valid(doc) != valid {
			t.Fatalf("Valid(%q) = %v, encoding/json %v", doc, !valid, valid)
		} else if !valid {
			return // any answer, no panic
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber() // numbers too large for float64 are valid JSON
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		switch want := v.(type) {
		case map[string]any:
			if !isObject || isArray {
				t.Fatalf("object %s: Members ok=%v Elements ok=%v", doc, isObject, isArray)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(doc, &raw); err != nil {
				t.Fatal(err)
			}
			last := map[string][]byte{}
			for _, m := range ms {
				if !json.Valid(m.Value) {
					t.Fatalf("member %q value %q is not JSON", m.Key, m.Value)
				}
				cut := doc[m.Start:m.End]
				if !bytes.HasPrefix(cut, []byte(`"`)) || !bytes.HasSuffix(cut, m.Value) {
					t.Fatalf("member %q offsets cut %q", m.Key, cut)
				}
				last[m.Key] = m.Value
				if m.Value[0] == '"' {
					checkString(t, m.Value)
				}
			}
			if len(last) != len(want) {
				t.Fatalf("%s: %d distinct keys, encoding/json %d", doc, len(last), len(want))
			}
			for k, val := range last {
				if !bytes.Equal(val, bytes.TrimSpace(raw[k])) {
					t.Fatalf("%s: key %q value %q, encoding/json %q", doc, k, val, raw[k])
				}
				if found, _, ok := jsonscan.Find(doc, k); !ok || !bytes.Equal(found.Value, val) {
					t.Fatalf("Find %q: %q %v", k, found.Value, ok)
				}
			}
		case []any:
			if !isArray || isObject || len(els) != len(want) {
				t.Fatalf("array %s: %d elements, encoding/json %d", doc, len(els), len(want))
			}
			for i, e := range els {
				if !json.Valid(e) {
					t.Fatalf("element %d %q is not JSON", i, e)
				}
			}
		case string:
			if !isString || str != want {
				t.Fatalf("String(%s) = %q, %v; encoding/json %q", doc, str, isString, want)
			}
		default:
			if isObject || isArray || isString {
				t.Fatalf("scalar %s: Members ok=%v Elements ok=%v", doc, isObject, isArray)
			}
		}
	})
}
