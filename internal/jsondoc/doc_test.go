package jsondoc_test

import (
	"bytes"
	"encoding/json"
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
