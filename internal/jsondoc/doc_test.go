package jsondoc_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/jsondoc"
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
	} {
		err := jsondoc.New([]byte(`{"a":[]}`)).ApplyOps([]patch.Operation{op})
		if err == nil || !strings.Contains(err.Error(), op.Operation) || !strings.Contains(err.Error(), op.Path) {
			t.Errorf("%s %s: error %v, want one naming the operation", op.Operation, op.Path, err)
		}
	}
}

// FuzzApplyOps applies the patch between two JSON documents the fuzzer gives (patch.Diff) to a
// Doc of the first: its bytes must hold the second, and its recorded operations, applied by
// patch.Apply (evanphx/json-patch, the oracle), must give the same.
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
