package undo

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

// FuzzUndoEntries checks that, for every patch.Diff between two JSON documents, the undo read
// from the patch alone (EntriesOf, what the engine's call.record does) is the one read from the applied
// document (Entries): the same entries, values equal as JSON.
func FuzzUndoEntries(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"spec":{"tolerations":[{"k":"a"},{"k":"b"},{"k":"c"}]}}`, `{"spec":{"tolerations":[{"k":"b"},{"k":"c"}]}}`},
		{`{"a":[1,2,3,4]}`, `{"a":[0,1,2,9,3,4,5]}`},
		{`{"a":[1,2,3,4,5,6]}`, `{"a":[7,2]}`},
		{`{"m":{"x":1,"y":{"z":[1]}}}`, `{"m":{"y":{"z":[1,2],"w":null},"v":"s"}}`},
		{`{"a~/b":{"c":1}}`, `{"a~/b":{"c":2,"d":{}}}`},
		{`[1,[2,3],{"a":[]}]`, `[[2],{"a":[4]},1]`},
		{`{"a":1,"a":2}`, `{"a":3}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, before, after string) {
		ops, err := patch.Diff([]byte(before), []byte(after))
		if err != nil || len(ops) == 0 || ops[0].Path == "" {
			return // a replace of the whole document is not diff-shaped (and never on an object)
		}
		hooked, err := applyOps([]byte(before), ops...)
		if err != nil || !sameJSON(hooked, json.RawMessage(after)) {
			return // evanphx/json-patch mishandles some valid patches (e.g. under an empty key); FuzzDiff checks ours
		}
		want := Entries(ops, []byte(before), hooked)
		got, ok := EntriesOf(ops, jsonscan.NewIndex([]byte(before)))
		if !ok {
			t.Fatalf("a diff is not diff-shaped: %s → %s: %+v", before, after, ops)
		}
		if len(got) != len(want) {
			t.Fatalf("%s → %s: %d entries from the patch, %d from the result", before, after, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Op != w.Op || g.Path != w.Path || !sameJSON(g.Hooked, w.Hooked) || !sameJSON(g.Original, w.Original) || (g.Len == nil) != (w.Len == nil) || g.Len != nil && *g.Len != *w.Len {
				t.Fatalf("%s → %s: entry %d from the patch %+v, from the result %+v", before, after, i, g, w)
			}
		}
	})
}

// sameJSON reports whether a and b are both absent or equal as JSON values.
func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestEntriesOfRefusesWhatItCannotReadWithoutTheResult covers the patches undoEntriesOf
// leaves to undoEntries: their values after the patch are not the operations' values.
func TestEntriesOfRefusesWhatItCannotReadWithoutTheResult(t *testing.T) {
	doc := jsonscan.NewIndex([]byte(`{"a":[1,2,3,4],"m":{"k":1}}`))
	op := func(o, p string, v any) patch.Operation { return patch.Operation{Operation: o, Path: p, Value: v} }
	for name, ops := range map[string][]patch.Operation{
		"move":                     {op("move", "/m/j", nil)},
		"append":                   {op("add", "/a/-", 5)},
		"a path under another":     {op("add", "/m/n", map[string]any{}), op("add", "/m/n/o", 1)},
		"the same path twice":      {op("replace", "/m/k", 2), op("replace", "/m/k", 3)},
		"adds not increasing":      {op("add", "/a/2", 5), op("add", "/a/1", 6)},
		"removes not decreasing":   {op("remove", "/a/1", nil), op("remove", "/a/2", nil)},
		"adds and removes":         {op("remove", "/a/3", nil), op("add", "/a/1", 6)},
		"a replace past an insert": {op("add", "/a/1", 6), op("replace", "/a/2", 7)},
		"a replace past a removal": {op("remove", "/a/1", nil), op("replace", "/a/2", 7)},
		"a parent that is missing": {op("add", "/x/y", 1)},
		"a remove of nothing":      {op("remove", "/m/q", nil)},
		"the whole document":       {op("replace", "", map[string]any{})},
	} {
		if entries, ok := EntriesOf(ops, doc); ok {
			t.Errorf("%s: undoEntriesOf took %+v: %+v", name, ops, entries)
		}
	}
	if _, ok := EntriesOf([]patch.Operation{op("replace", "/a/0", 0), op("remove", "/a/3", nil), op("remove", "/a/2", nil), op("add", "/m/j", 1)}, doc); !ok {
		t.Error("a diff-shaped patch was refused")
	}
}

// applyOps applies ops to doc (RFC 6902).
func applyOps(doc []byte, ops ...patch.Operation) ([]byte, error) {
	p, err := patch.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return patch.Apply(doc, p)
}

// TestEntriesOfReadsAnAddedMemberAsTheIndexDoes covers the adds whose original EntriesOf reads
// in the parent object alone (member): what was there is what the index of before holds at
// the path, for members that are missing, present (a typed compare adds where raw holds {} or
// null), repeated, or named with escapes in the pointer or in the JSON.
func TestEntriesOfReadsAnAddedMemberAsTheIndexDoes(t *testing.T) {
	doc := []byte(`{"spec":{"containers":[{"name":"a"}],"nodeSelector":{},"tolerations":null,"x":1,"x":{"last":true},"a/b":2,"c~d":3,"e\u002ff":4},"metadata":{"name":"n"}}`)
	add := func(path string) patch.Operation {
		return patch.Operation{Operation: "add", Path: path, Value: json.RawMessage(`{"k":"v"}`)}
	}
	for _, tc := range []struct {
		name string
		ops  []patch.Operation
	}{
		{"a missing member", []patch.Operation{add("/spec/affinity")}},
		{"a member present as an empty object", []patch.Operation{add("/spec/nodeSelector")}},
		{"a member present as null", []patch.Operation{add("/spec/tolerations")}},
		{"a repeated member: the last", []patch.Operation{add("/spec/x")}},
		{"a slash escaped in the pointer", []patch.Operation{add("/spec/a~1b")}},
		{"a tilde escaped in the pointer", []patch.Operation{add("/spec/c~0d")}},
		{"a slash escaped in the JSON", []patch.Operation{add("/spec/e~1f")}},
		{"two adds in one object", []patch.Operation{add("/spec/nodeSelector"), add("/spec/x")}},
		{"three adds in one object (the index)", []patch.Operation{add("/spec/affinity"), add("/spec/nodeSelector"), add("/spec/x")}},
		{"adds in two objects", []patch.Operation{add("/metadata/name"), add("/spec/a~1b")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := EntriesOf(tc.ops, jsonscan.NewIndex(doc))
			if !ok || len(got) != len(tc.ops) {
				t.Fatalf("EntriesOf = %+v, %v", got, ok)
			}
			index := jsonscan.NewIndex(doc)
			for i, op := range tc.ops {
				want, had := index.Lookup(op.Path)
				if e := got[i]; (e.Original != nil) != had || string(e.Original) != string(want) || string(e.Hooked) != `{"k":"v"}` {
					t.Errorf("%s: entry %+v (original %s), the index holds %s (%v)", op.Path, e, e.Original, want, had)
				}
			}
		})
	}
}

// BenchmarkEntriesOf reads the undo of a typed hook's write on the ~5 KiB benchmark Pod (an
// add of spec.nodeSelector) from the request's index, as call.record does: its top level
// split already (intake), spec not.
func BenchmarkEntriesOf(b *testing.B) {
	raw := fixtures.JSON(fixtures.Pod("ns", "web"))
	top, _ := jsonscan.Members(raw)
	ops := []patch.Operation{{Operation: "add", Path: "/spec/nodeSelector", Value: json.RawMessage(`{"pool":"tenants"}`)}}
	b.ReportAllocs()
	for b.Loop() {
		if entries, ok := EntriesOf(ops, jsonscan.NewIndexOf(raw, top)); !ok || len(entries) != 1 {
			b.Fatal(entries, ok)
		}
	}
}

// annotationInBefore is AnnotationIn as it was before it read the value without encoding/json:
// the oracle of FuzzAnnotationIn.
func annotationInBefore(meta []byte) (string, bool) {
	ann, _, ok := jsonscan.Find(meta, "annotations")
	if !ok {
		return "", false
	}
	m, _, ok := jsonscan.Find(ann.Value, Annotation)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(m.Value, &s) != nil {
		return "", false
	}
	return s, true
}

// FuzzAnnotationIn checks that AnnotationIn reads the Annotation's value in any metadata bytes
// (a tenant's, valid JSON or not) as encoding/json's Unmarshal of it into a string did.
func FuzzAnnotationIn(f *testing.F) {
	for _, lit := range []string{
		`"s2.u.abc-DEF_0"`, `null`, `1`, `{}`, `[]`, `true`, `"a\"b"`, `"\u00e9\ud800"`, "\"\xff\"", "\"a\x01\"", `"abc`, `"a\qb"`, `""`, ` "x" `,
	} {
		f.Add([]byte(`{"name":"a","annotations":{"x":"1","synchook.io/undo":` + lit + `}}`))
	}
	f.Add([]byte(`{"annotations":{"synchook.io/undo":"a","synchook.io/undo":null}}`))
	f.Add([]byte(`{"annotations":null}`))
	f.Fuzz(func(t *testing.T, meta []byte) {
		got, gotOK := AnnotationIn(meta)
		if want, wantOK := annotationInBefore(meta); got != want || gotOK != wantOK {
			t.Fatalf("AnnotationIn(%q) = %q, %v; encoding/json: %q, %v", meta, got, gotOK, want, wantOK)
		}
	})
}
