package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/patch"
)

// FuzzMetadataPath proves the label/annotation fast path equal to the typed path: the same
// labels and strip hooks, registered once as MetadataHooks (run on the request's JSON) and once
// as plain hooks (typed decode → hooks → encode → diff), in four chains. For every input the
// fast path refuses only what the typed path refuses; when both answer, the patched objects are
// equal, and the merge answer decoded INTO the request object (as vcluster does) and into a
// new object gives that object too.
func FuzzMetadataPath(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`,
		`{"apiVersion":"v1","kind":"Pod"}`,
		`{}`,
		`{"metadata":null}`,
		`{"metadata":{}}`,
		`{"metadata":{"labels":null,"annotations":{}}}`,
		`{"metadata":{"labels":{"app":"web","synchook.io/a":"0"},"annotations":{"example.com/b":"x"}}}`,
		`{"metadata":{"labels":{"app":"web"},"namespace":"team-a"},"spec":{"nodeName":"n"}}`,
		`{"metadata":{"labels":{"app":5}}}`,
		`{"metadata":{"labels":{"app":"w"}},"metadata":{"name":"dup"}}`,
		`{"metadata":{"labels":{"a\u00e9":"\ud83d\ude00","x~/y":"z"}}}`,
		`{"spec":"not a spec","metadata":{"labels":{"app":"web"}}}`,
		`{"metadata":{"labels":{"synchook.io/a":"0","app":"w","synchook.io/a":"2"},"annotations":{"x":null}}}`,
		`{"metadata":{"labels":{ "synchook.io/a" : "\u0030" , "app":"\u00e9"} ,"annotations":{ }}}`,
		`[1,2]`,
	} {
		f.Add([]byte(s))
	}
	f.Add(fixtures.JSON(fixtures.Pod("ns", "web")))
	labels := builtin.Labels{Labels: map[string]string{"synchook.io/a": "1"}, Annotations: map[string]string{"example.com/c": "y"}}
	strip := builtin.Strip{Paths: []string{"/metadata/labels/app", "/metadata/annotations/example.com~1b"}}
	stripFn, err := builtin.StripFunc(strip)
	if err != nil {
		f.Fatal(err)
	}
	stripMeta, _ := builtin.StripMetadataFunc(strip)
	ofTeamA, err := builtin.Filtered(builtin.Filter{Namespaces: []string{"team-a"}}, builtin.LabelsFunc(labels))
	if err != nil {
		f.Fatal(err)
	}
	ofTeamAMeta, err := builtin.FilteredMetadata(builtin.Filter{Namespaces: []string{"team-a"}}, builtin.LabelsMetadataFunc(labels))
	if err != nil {
		f.Fatal(err)
	}
	type link struct {
		typed hooks.MutateFunc
		meta  hooks.MetadataFunc
	}
	chains := map[hooks.HookType][]link{
		hooks.CreatePhysical: {{builtin.LabelsFunc(labels), builtin.LabelsMetadataFunc(labels)}},
		hooks.UpdatePhysical: {{stripFn, stripMeta}},
		hooks.GetPhysical:    {{builtin.LabelsFunc(labels), builtin.LabelsMetadataFunc(labels)}, {stripFn, stripMeta}},
		hooks.CreateVirtual:  {{stripFn, stripMeta}, {ofTeamA, ofTeamAMeta}},
	}
	fast, typed := engine.NewRegistry(nil), engine.NewRegistry(nil)
	for t, links := range chains {
		for i, l := range links {
			name := string(t) + "-" + string(rune('a'+i))
			fast.MustRegister(hooks.NewMetadataFunc(name, &corev1.Pod{}, []hooks.HookType{t}, l.typed, l.meta))
			typed.MustRegister(hooks.NewFunc(name, &corev1.Pod{}, []hooks.HookType{t}, l.typed))
		}
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	f.Fuzz(func(t *testing.T, raw []byte) {
		for ht := range chains {
			want, werr := typed.Mutate(context.Background(), gvk, ht, raw)
			got, gerr := fast.Mutate(context.Background(), gvk, ht, raw)
			if gerr != nil {
				var de *failure.DecodeError
				if !errors.As(gerr, &de) || werr == nil {
					t.Fatalf("%s: fast path error %v, typed path %v", ht, gerr, werr)
				}
				continue
			}
			if werr != nil {
				continue // the fast path reads only metadata: it may accept what the typed decode refuses
			}
			wantObj, ok := patched(raw, want.Patch)
			if !ok {
				continue // the typed path's own patch does not apply (repeated keys): not this test's subject
			}
			if gotObj, ok := patched(raw, got.Patch); !ok || !sameObject(gotObj, wantObj) {
				t.Fatalf("%s: fast path gives\n%+v\ntyped path\n%+v", ht, gotObj.ObjectMeta, wantObj.ObjectMeta)
			}
			// vcluster sends json.Marshal of its typed object: check the merge answer on that form.
			canonical, err := json.Marshal(wantObjOf(t, raw))
			if err != nil {
				t.Fatal(err)
			}
			res, err := fast.Mutate(context.Background(), gvk, ht, canonical)
			if err != nil {
				t.Fatalf("%s: canonical %s: %v", ht, canonical, err)
			}
			merge, err := res.Answer()
			if err != nil {
				t.Fatalf("%s: answer: %v", ht, err)
			}
			if merge == nil {
				if res.Patch != nil {
					t.Fatalf("%s: a patch without a merge answer", ht)
				}
				continue
			}
			into := wantObjOf(t, canonical)
			if err := json.Unmarshal(merge, into); err != nil {
				t.Fatalf("%s: merge answer %s: %v", ht, merge, err)
			}
			wantMerged, _ := patched(canonical, res.Patch)
			if !sameObject(into, wantMerged) {
				t.Fatalf("%s: merge answer decoded into the request gives\n%+v\nwant\n%+v\nanswer %s", ht, into.ObjectMeta, wantMerged.ObjectMeta, merge)
			}
			var fresh corev1.Pod
			if err := json.Unmarshal(merge, &fresh); err != nil || !sameObject(&fresh, wantMerged) {
				t.Fatalf("%s: merge answer decoded fresh gives %+v (%v)", ht, fresh.ObjectMeta, err)
			}
		}
	})
}

// wantObjOf decodes raw (already decoded once without error) into a Pod.
func wantObjOf(t *testing.T, raw []byte) *corev1.Pod {
	t.Helper()
	pod, ok := patched(raw, nil)
	if !ok {
		t.Fatalf("%s does not decode", raw)
	}
	return pod
}

// patched decodes raw with p applied (p nil: raw itself) into a Pod; ok is false when p does
// not apply or the result does not decode.
func patched(raw, p []byte) (pod *corev1.Pod, ok bool) {
	doc := raw
	if p != nil {
		var err error
		if doc, err = patch.Apply(raw, p); err != nil {
			return nil, false
		}
	}
	pod = &corev1.Pod{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(doc, pod); err != nil {
		return nil, false
	}
	return pod, true
}

// sameObject compares two pods with empty and nil label and annotation maps counted equal.
func sameObject(a, b client.Object) bool {
	norm := func(o client.Object) client.Object {
		o = o.DeepCopyObject().(client.Object)
		if len(o.GetLabels()) == 0 {
			o.SetLabels(nil)
		}
		if len(o.GetAnnotations()) == 0 {
			o.SetAnnotations(nil)
		}
		return o
	}
	return equality.Semantic.DeepEqual(norm(a), norm(b))
}
