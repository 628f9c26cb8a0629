package jsondoc_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/patch"
)

func TestApplyOpsMakesThePatchAndKeepsUntouchedBytes(t *testing.T) {
	raw := []byte(`{"b": {"x" : 1},"a":[1, 2,3],"m":{"k":"v"}}`)
	doc := jsondoc.New(raw)
	ops := []patch.Operation{
		{Operation: "add", Path: "/a/1", Value: json.RawMessage(`"new"`)},
		{Operation: "remove", Path: "/m/k"},
		{Operation: "replace", Path: "/a/0", Value: 7},
	}
	if err := doc.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	got, err := doc.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":{"x" : 1},"a":[7,"new",2,3],"m":{}}`; string(got) != want {
		t.Errorf("Bytes = %s, want %s (the untouched member's bytes as they were)", got, want)
	}
}

func TestApplyOpsNamesTheOperationThatDoesNotApply(t *testing.T) {
	for _, op := range []patch.Operation{
		{Operation: "remove", Path: "/nope"},
		{Operation: "replace", Path: "/nope", Value: 1},
		{Operation: "add", Path: "/a/9", Value: 1},
		{Operation: "move", Path: "/a"},
		{Operation: "add", Path: "a", Value: 1},
		{Operation: "add", Path: "/a/+0", Value: 1}, // RFC 6901: an index is digits, no sign
		{Operation: "add", Path: "/a/-0", Value: 1},
		{Operation: "add", Path: "/a/00", Value: 1},
	} {
		err := jsondoc.New([]byte(`{"a":[]}`)).ApplyOps([]patch.Operation{op})
		if err == nil || !strings.Contains(err.Error(), op.Operation) || !strings.Contains(err.Error(), op.Path) {
			t.Errorf("%s %s: error %v, want one naming the operation", op.Operation, op.Path, err)
		}
	}
}

// FuzzApplyOps applies the patch between two JSON documents the fuzzer gives (patch.Diff) to a
// Doc of the first: its bytes must hold the second, and its recorded operations, applied by
// patch.Apply (evanphx/json-patch, the oracle), must give the same; a Doc made by NewOf must
// edit as New's (checkNewOf).
func FuzzApplyOps(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,3],"b":{"c":"d"}}`), []byte(`{"a":[1,"x",3,4],"b":{}}`))
	f.Add([]byte(`{"spec":{"args":["x","y"],"n":null}}`), []byte(`{"spec":{"args":["z"],"n":{"m":[]}}}`))
	f.Add([]byte(`{"a":[1,{"a":2}]}`), []byte(`{"a":[{"a":3},1,2]}`))
	f.Fuzz(func(t *testing.T, x, y []byte) {
		if !json.Valid(x) || !json.Valid(y) || !isObject(x) || !isObject(y) { // objects, as requests are
			t.Skip()
		}
		ops, err := patch.Diff(x, y)
		if err != nil {
			t.Skip()
		}
		checkNewOf(t, x, ops)
		doc := jsondoc.New(x)
		if err := doc.ApplyOps(ops); err != nil {
			t.Fatalf("ApplyOps(%v): %v", ops, err)
		}
		got, err := doc.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got, y) {
			t.Fatalf("Bytes = %s, want %s", got, y)
		}
		recorded, _ := patch.Marshal(doc.Ops())
		if applied, err := patch.Apply(x, recorded); err != nil || !sameJSON(t, applied, y) {
			t.Fatalf("the recorded operations %s applied by patch.Apply: %s, %v; want %s", recorded, applied, err, y)
		}
	})
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	ea, _ := json.Marshal(x)
	eb, _ := json.Marshal(y)
	return string(ea) == string(eb)
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// TestRemovedHoldsOnlyTheOriginalsMembers: Removed lists the members of the original object
// that edits removed, with their original bytes (package answer zeroes what they held); a
// member an edit added and another removed again was never there.
func TestRemovedHoldsOnlyTheOriginalsMembers(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  string
		want map[string]string // key → Orig
	}{
		{"a member added and removed again is not in it", `[{"op":"add","path":"/n","value":{"k":1}},{"op":"remove","path":"/n"}]`, map[string]string{}},
		{"an original member removed is in it with its bytes", `[{"op":"remove","path":"/a"}]`, map[string]string{"a": `{"x" : 1}`}},
		{"an original member replaced and removed is in it with its original bytes", `[{"op":"replace","path":"/a","value":2},{"op":"remove","path":"/a"}]`, map[string]string{"a": `{"x" : 1}`}},
		{"an original member removed, added and removed again is in it once", `[{"op":"remove","path":"/a"},{"op":"add","path":"/a","value":3},{"op":"remove","path":"/a"}]`, map[string]string{"a": `{"x" : 1}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ops []patch.Operation
			if err := json.Unmarshal([]byte(tc.ops), &ops); err != nil {
				t.Fatal(err)
			}
			doc := jsondoc.New([]byte(`{"a":{"x" : 1},"b":true}`))
			if err := doc.ApplyOps(ops); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range doc.Root().Removed {
				if _, twice := got[r.Key]; twice {
					t.Errorf("%q is in Removed twice", r.Key)
				}
				got[r.Key] = string(r.Node.Orig)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("Removed = %q, want %q", got, tc.want)
			}
		})
	}
}

// dump appends the tree of n as edited (its form, bytes, members, removed members and
// elements, recursively): two Docs with the same dump answer every reader the same.
func dump(b []byte, n *jsondoc.Node) []byte {
	object, array := n.IsSplit()
	b = fmt.Appendf(b, "{raw %q orig %q set %v %#v changed %v object %v array %v", n.Raw, n.Orig, n.IsSet, n.Value, n.Changed, object, array)
	for _, m := range n.Members {
		b = dump(fmt.Appendf(b, " member %q ", m.Key), m.Node)
	}
	for _, m := range n.Removed {
		b = dump(fmt.Appendf(b, " removed %q ", m.Key), m.Node)
	}
	for _, e := range n.Elements {
		b = dump(append(b, " element "...), e)
	}
	return append(b, '}')
}

// checkNewOf applies ops to New(raw) and to NewOf(raw, its top-level members) and checks that
// both give the same tree, bytes, recorded operations and errors, after every operation (NewOf
// split only what the first reader of New splits).
func checkNewOf(t *testing.T, raw []byte, ops []patch.Operation) {
	t.Helper()
	top, _ := jsonscan.Members(raw)
	want, got := jsondoc.New(raw), jsondoc.NewOf(raw, top)
	for i := range ops {
		wantErr, gotErr := want.ApplyOps(ops[i:i+1]), got.ApplyOps(ops[i:i+1])
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%s: operation %d: NewOf's error %v, New's %v", raw, i, gotErr, wantErr)
		}
		if wantErr != nil {
			return // the Doc is half-edited: dropped
		}
		if w, g := dump(nil, want.Root()), dump(nil, got.Root()); string(g) != string(w) {
			t.Fatalf("%s: after operation %d the trees differ:\nNewOf %s\nNew   %s", raw, i, g, w)
		}
		wb, wErr := want.Bytes()
		gb, gErr := got.Bytes()
		if string(gb) != string(wb) || (wErr == nil) != (gErr == nil) {
			t.Fatalf("%s: Bytes: NewOf %s, %v; New %s, %v", raw, gb, gErr, wb, wErr)
		}
		if w, g := fmt.Sprint(want.Ops()), fmt.Sprint(got.Ops()); g != w {
			t.Fatalf("%s: Ops: NewOf %s; New %s", raw, g, w)
		}
	}
}

func TestNewOfEditsAsNew(t *testing.T) {
	add := func(path string, v any) patch.Operation {
		return patch.Operation{Operation: "add", Path: path, Value: v}
	}
	remove := func(path string) patch.Operation { return patch.Operation{Operation: "remove", Path: path} }
	for _, c := range []struct {
		name string
		raw  string
		ops  []patch.Operation
	}{
		{"an annotation removed and a nodeSelector removed", `{"kind":"Pod","metadata":{"annotations":{"synchook.io/undo":"x","a":"b"}},"spec":{"nodeSelector":{"pool":"p"},"x":1}}`, []patch.Operation{remove("/metadata/annotations/synchook.io~1undo"), remove("/spec/nodeSelector")}},
		{"a top-level member removed and added again", ` { "a" : 1 , "b" : [ 1 , 2 ] } `, []patch.Operation{remove("/a"), add("/a", 2), add("/b/0", 0)}},
		{"a member added to an empty object", `{}`, []patch.Operation{add("/a", map[string]any{"b": 1})}},
		{"keys written with escapes", `{"sp\u0065c":{"a\/b":1},"x~y":2}`, []patch.Operation{remove("/spec/a~1b"), remove("/x~0y")}},
		{"a repeated top-level key (decoded, not split)", `{"a":1,"a":{"b":2}}`, []patch.Operation{add("/a/c", 3)}},
		{"an operation that does not apply", `{"a":1}`, []patch.Operation{remove("/nope")}},
		{"a repeated key inside a member", `{"m":{"k":1,"k":2},"n":3}`, []patch.Operation{remove("/m/k"), add("/n", 4)}},
	} {
		t.Run("a Doc of "+c.name+" edits as New's", func(t *testing.T) { checkNewOf(t, []byte(c.raw), c.ops) })
	}
}
