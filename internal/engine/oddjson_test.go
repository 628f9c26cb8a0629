package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/patch"
)

// TestOddJSONRoundTripsExactly runs a hook that adds one annotation on odd inputs, typed and
// unstructured, and checks that the patched request is byte-for-byte the request with only that
// annotation added: whatever no hook changed is never rewritten (numbers keep their digits,
// keys their escapes, null stays null, {} stays {}, absent stays absent).
func TestOddJSONRoundTripsExactly(t *testing.T) {
	widgetGVK := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	cases := []struct {
		name string
		gvk  schema.GroupVersionKind
		raw  string
		want string
	}{
		{
			"a large integer in a CRD field keeps every digit", widgetGVK,
			`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","annotations":{}},"spec":{"big":12345678901234567890123,"f":1.50}}`,
			`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","annotations":{"synchook.io/odd":"yes"}},"spec":{"big":12345678901234567890123,"f":1.50}}`,
		},
		{
			"unicode keys and values survive", widgetGVK,
			`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","annotations":{}},"spec":{"clé":"värde","\u65e5\u672c":"😀"}}`,
			`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","annotations":{"synchook.io/odd":"yes"}},"spec":{"clé":"värde","\u65e5\u672c":"😀"}}`,
		},
		{
			"label keys with / and ~ survive", podGVK,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a.io/b~c":"1","x/y":"2"},"annotations":{}}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a.io/b~c":"1","x/y":"2"},"annotations":{"synchook.io/odd":"yes"}}}`,
		},
		{
			"an empty map stays empty and an absent one absent", podGVK,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{},"annotations":{}},"spec":{"nodeSelector":{}}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{},"annotations":{"synchook.io/odd":"yes"}},"spec":{"nodeSelector":{}}}`,
		},
		{
			"null values stay null", podGVK,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":null,"annotations":{}},"spec":{"containers":null},"status":{}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":null,"annotations":{"synchook.io/odd":"yes"}},"spec":{"containers":null},"status":{}}`,
		},
		{
			"fields the types do not know survive on a typed kind", podGVK,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{},"newMeta":[1,{"a":null}]},"spec":{"futureField":{"x":1e3}}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"synchook.io/odd":"yes"},"newMeta":[1,{"a":null}]},"spec":{"futureField":{"x":1e3}}}`,
		},
		{
			"a quantity in a non-canonical form is not rewritten", podGVK,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{}},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1000m"}}}]}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"synchook.io/odd":"yes"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1000m"}}}]}}`,
		},
	}
	annotate := func(_ context.Context, o client.Object) (client.Object, error) {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["synchook.io/odd"] = "yes"
		o.SetAnnotations(a)
		return o, nil
	}
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(widgetGVK)
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		funcHook{name: "pod", obj: &corev1.Pod{}, fns: map[hooks.HookType]hooks.MutateFunc{hooks.CreatePhysical: annotate}},
		funcHook{name: "widget", obj: widget, fns: map[hooks.HookType]hooks.MutateFunc{hooks.CreatePhysical: annotate}},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := reg.Mutate(t.Context(), tc.gvk, hooks.CreatePhysical, []byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if res.Operations != 1 {
				t.Errorf("patch %s has %d operations, want 1", res.Patch, res.Operations)
			}
			got, err := patch.Apply([]byte(tc.raw), res.Patch)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(canonical(t, got), canonical(t, []byte(tc.want))) {
				t.Errorf("patched\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// canonical re-encodes JSON with its numbers and strings kept as written (json.Number), keys
// sorted, so that only structure and literal values are compared.
func canonical(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
