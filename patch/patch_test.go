package patch_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"

	"github.com/synchook/synchook/patch"
)

func TestCreateGivesNilForEqualDocuments(t *testing.T) {
	ops, err := createPatch([]byte(`{"a":{"b":1}}`), []byte(`{"a":{"b":1}}`))
	if err != nil || ops != nil {
		t.Fatalf("Create = %v, %v, want nil, nil", ops, err)
	}
	b, err := patch.Marshal(ops)
	if err != nil || b != nil {
		t.Fatalf("Marshal(nil) = %q, %v, want nil (not []) ", b, err)
	}
}

func TestCreateThenApplyRoundTrips(t *testing.T) {
	cases := []struct{ name, original, mutated string }{
		{"a label is added", `{"metadata":{"labels":{"a":"1"}}}`, `{"metadata":{"labels":{"a":"1","b":"2"}}}`},
		{"a key with ~ and / is escaped", `{"metadata":{"annotations":{}}}`, `{"metadata":{"annotations":{"x.io/a~b":"v"}}}`},
		{"an array element changes", `{"l":[1,2,3]}`, `{"l":[1,5,3]}`},
		{"a field is removed", `{"a":1,"b":2}`, `{"a":1}`},
		{"a null value is kept", `{"a":null}`, `{"a":null,"b":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := createPatch([]byte(tc.original), []byte(tc.mutated))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := patch.Marshal(ops)
			got, err := patch.Apply([]byte(tc.original), b)
			if err != nil {
				t.Fatal(err)
			}
			assertJSONEqual(t, got, []byte(tc.mutated))
		})
	}
}

func TestApplyFailsWithoutTouchingTheDocument(t *testing.T) {
	doc := []byte(`{"a":1}`)
	if _, err := patch.Apply(doc, []byte(`[{"op":"replace","path":"/missing","value":1}]`)); err == nil {
		t.Fatal("replace of a missing path applied")
	}
	if _, err := patch.Apply(doc, []byte(`not json`)); err == nil || !strings.Contains(err.Error(), "decode JSON patch") {
		t.Fatalf("malformed patch error = %v", err)
	}
	if string(doc) != `{"a":1}` {
		t.Fatalf("document changed: %s", doc)
	}
}

func TestRebaseCreatesMissingParentsAndKeepsUnknownFields(t *testing.T) {
	raw := []byte(`{"metadata":{"name":"p"},"unknown":{"x":1}}`)
	// computed between normalised copies that had "status":{} and a creationTimestamp
	ops := []patch.Operation{
		{Operation: "add", Path: "/status/phase", Value: "Running"},
		{Operation: "replace", Path: "/metadata/creationTimestamp", Value: "2026-01-01T00:00:00Z"},
		{Operation: "remove", Path: "/spec/gone"},
	}
	rebased, err := patch.Rebase(raw, ops)
	if err != nil {
		t.Fatal(err)
	}
	n := len(rebased)
	b, err := patch.Marshal(rebased)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := patch.Apply(raw, b)
	if err != nil {
		t.Fatalf("rebased patch %s does not apply: %v", b, err)
	}
	assertJSONEqual(t, applied, []byte(`{"metadata":{"name":"p","creationTimestamp":"2026-01-01T00:00:00Z"},"unknown":{"x":1},"status":{"phase":"Running"}}`))
	if n != 2 {
		t.Errorf("operations = %d, want 2", n)
	}
}

func TestGuard(t *testing.T) {
	cases := []struct {
		name, op, path, field string
	}{
		{"a name change is rejected", "replace", "/metadata/name", "/metadata/name"},
		{"a namespace removal is rejected", "remove", "/metadata/namespace", "/metadata/namespace"},
		{"replacing the whole metadata is rejected", "replace", "/metadata", "/metadata/name"},
		{"replacing the whole document is rejected", "replace", "", "/apiVersion"},
		{"a kind change is rejected", "replace", "/kind", "/kind"},
		{"a uid change is rejected", "add", "/metadata/uid", "/metadata/uid"},
		{"an apiVersion change is rejected", "replace", "/apiVersion", "/apiVersion"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := patch.Guard("h", []patch.Operation{{Operation: "add", Path: "/metadata/labels/a"}, {Operation: tc.op, Path: tc.path}})
			var fe *patch.ForbiddenPathError
			if !errors.As(err, &fe) || fe.Field != tc.field || fe.Hook != "h" || !errors.Is(err, patch.ErrForbiddenPath) {
				t.Fatalf("Guard error = %#v, want field %s", err, tc.field)
			}
			if !strings.Contains(err.Error(), `hook "h"`) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("message %q does not name the hook and the path", err)
			}
		})
	}
	t.Run("labels, annotations and a name-like label are allowed", func(t *testing.T) {
		ops := []patch.Operation{{Operation: "add", Path: "/metadata/labels/metadata~1name"}, {Operation: "add", Path: "/metadata/namespaced"}, {Operation: "add", Path: "/kinds"}}
		if err := patch.Guard("h", ops); err != nil {
			t.Fatal(err)
		}
	})
}

func assertJSONEqual(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("got %s, want %s", gb, wb)
	}
}

func TestGuardDocumentsAllowsAParentWhoseProtectedValuesDidNotChange(t *testing.T) {
	before := []byte(`{"apiVersion":"x/v1","kind":"W"}`)
	after := []byte(`{"apiVersion":"x/v1","kind":"W","metadata":{"labels":{"a":"b"}}}`)
	ops := []patch.Operation{{Operation: "add", Path: "/metadata", Value: map[string]any{"labels": map[string]any{"a": "b"}}}}
	if err := patch.GuardDocuments("h", ops, before, after); err != nil {
		t.Fatalf("adding metadata without a name was rejected: %v", err)
	}
	renamed := []byte(`{"apiVersion":"x/v1","kind":"W","metadata":{"name":"n"}}`)
	if err := patch.GuardDocuments("h", ops, before, renamed); !errors.Is(err, patch.ErrForbiddenPath) {
		t.Fatalf("adding metadata with a name was allowed: %v", err)
	}
	direct := []patch.Operation{{Operation: "replace", Path: "/kind", Value: "W"}}
	if err := patch.GuardDocuments("h", direct, before, before); !errors.Is(err, patch.ErrForbiddenPath) {
		t.Fatalf("an operation on /kind itself was allowed: %v", err)
	}
}

// createPatch is gomodules.xyz/jsonpatch's CreatePatch (the library the package used to wrap),
// the reference these tests compare with; equal documents give nil.
func createPatch(original, mutated []byte) ([]patch.Operation, error) {
	ops, err := jsonpatch.CreatePatch(original, mutated)
	if len(ops) == 0 {
		ops = nil
	}
	return ops, err
}

// FuzzMarshal checks that Marshal gives, byte for byte, what encoding/json gives for the same
// operations through jsonpatch.Operation's MarshalJSON: escapes (HTML-safe, invalid UTF-8,
// control characters), null and absent values, string and decoded JSON values.
func FuzzMarshal(f *testing.F) {
	for _, s := range [][3]string{
		{"/metadata/labels/a", "b", `{"x":[1,"<&>"]}`},
		{"/metadata/annotations/a~1b", "\u2028\x00\xff\"\\", `null`},
		{"/spec/x", "", `"s"`},
		{"/spec/<x>", "a&b", `"<"`},
		{"/metadata", "x", ` { "labels" : {"a":"<b>"} } `},
		{"", "é<script>", `[true,1.5e300,-0]`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, path, text, raw string) {
		var decoded any
		if json.Unmarshal([]byte(raw), &decoded) != nil {
			decoded = raw
		}
		ops := []patch.Operation{
			{Operation: "add", Path: path, Value: text},
			{Operation: "replace", Path: text, Value: decoded},
			{Operation: "add", Path: path},
			{Operation: "remove", Path: path},
			{Operation: "remove", Path: path, Value: text},
			{Operation: text, Path: path, Value: map[string]string{text: path}},
		}
		if json.Valid([]byte(raw)) { // as the label/annotation fast path adds metadata
			ops = append(ops, patch.Operation{Operation: "add", Path: path, Value: json.RawMessage(raw)})
		}
		for n := range len(ops) + 1 {
			got, err := patch.Marshal(ops[:n])
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(ops[:n])
			if n == 0 {
				want = nil
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Marshal(%d ops) = %s; encoding/json %s (%v)", n, got, want, err)
			}
		}
	})
}
