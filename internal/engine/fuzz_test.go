package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/patch"
)

// FuzzRun runs a label hook chain on arbitrary object JSON, as a typed Pod and as an
// Unstructured custom resource. It must never panic; an error must be a DecodeError; a patch
// must apply to the input and add exactly the label, leaving every other field as it was.
func FuzzRun(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
	f.Add([]byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"labels":null},"spec":{"a~/b":[1,2e30,null]}}`))
	f.Add([]byte(`{"metadata":{"labels":{"x":"y"},"annotations":{}},"spec":{"unknown":{"deep":[{}]}},"status":null}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"synchook.io/fuzz":"old"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1000m"}}}]}}`))
	f.Add([]byte(`{"metadata":{"name":"\u00e9\ud83d\ude00","creationTimestamp":null},"spec":{"n":12345678901234567890}}`))
	f.Add(fixtures.JSON(fixtures.Pod("ns", "web")))
	label := func(_ context.Context, o client.Object) (client.Object, error) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["synchook.io/fuzz"] = "true"
		o.SetLabels(l)
		return o, nil
	}
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion("example.com/v1")
	widget.SetKind("Widget")
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		funcHook{name: "pod", obj: &corev1.Pod{}, fns: map[hooks.HookType]hooks.MutateFunc{hooks.CreatePhysical: label}},
		funcHook{name: "widget", obj: widget, fns: map[hooks.HookType]hooks.MutateFunc{hooks.CreatePhysical: label}},
	)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, gvk := range []struct{ group, version, kind string }{{"", "v1", "Pod"}, {"example.com", "v1", "Widget"}} {
			key := corev1.SchemeGroupVersion.WithKind(gvk.kind)
			key.Group = gvk.group
			res, err := reg.Mutate(context.Background(), key, hooks.CreatePhysical, raw)
			if err != nil {
				var de *failure.DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("%s: error %v is not a DecodeError", gvk.kind, err)
				}
				continue
			}
			if res.Patch == nil {
				continue // the label was already there
			}
			out, err := patch.Apply(raw, res.Patch)
			if err != nil {
				t.Fatalf("%s: patch %s does not apply to %s: %v", gvk.kind, res.Patch, raw, err)
			}
			// everything but metadata.labels is exactly as it was
			var in, got map[string]any // numbers as written: the chain takes 1E700, a float64 does not
			if decodeNumbers(raw, &in) != nil {
				t.Fatalf("input decoded by the chain but not as a map: %s", raw)
			}
			if err := decodeNumbers(out, &got); err != nil {
				t.Fatal(err)
			}
			gotLabels := dig(got, "metadata", "labels")
			if gotLabels == nil || gotLabels.(map[string]any)["synchook.io/fuzz"] != "true" {
				t.Fatalf("%s: label missing after patch %s: %s", gvk.kind, res.Patch, out)
			}
			dropLabels(in)
			dropLabels(got)
			a, _ := json.Marshal(in)
			b, _ := json.Marshal(got)
			if string(a) != string(b) {
				t.Fatalf("%s: patch %s changed more than the labels:\n in %s\nout %s", gvk.kind, res.Patch, a, b)
			}
		}
	})
}

func dig(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// dropLabels removes metadata.labels, and metadata when nothing else is in it (a null or
// absent metadata must become an object to hold the label).
func dropLabels(m map[string]any) {
	if v, ok := m["metadata"]; ok && v == nil {
		delete(m, "metadata")
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "labels")
		if len(md) == 0 {
			delete(m, "metadata")
		}
	}
}

// decodeNumbers decodes data into v with each number kept as its text (json.Number).
func decodeNumbers(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}
