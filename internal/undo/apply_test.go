package undo

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/synchook/synchook/internal/jsondoc"
)

// applyCase is an undo applied to an object as the host stored it (the hooks' write after the
// apiserver dropped empty maps and lists, added defaults, or its admission changed it).
type applyCase struct {
	name    string
	stored  string  // the stored object, without the Annotation (Apply removes it first)
	entries []Entry // as recorded, in order
	want    string  // what the read gives
	skipped map[string]int
}

var applyCases = []applyCase{{
	name:    "a Secret's only key, stripped: the apiserver dropped data",
	stored:  `{"metadata":{"name":"s"}}`,
	entries: []Entry{{Path: "/data/password", Original: json.RawMessage(`"cHc="`)}},
	want:    `{"metadata":{"name":"s"},"data":{"password":"cHc="}}`,
}, {
	name:    "the hooks emptied data as a whole ({}): stored as absent",
	stored:  `{"metadata":{"name":"s"}}`,
	entries: []Entry{{Path: "/data", Hooked: json.RawMessage(`{}`), Original: json.RawMessage(`{"password":"cHc="}`)}},
	want:    `{"metadata":{"name":"s"},"data":{"password":"cHc="}}`,
}, {
	name:    "a pod's only label",
	stored:  `{"metadata":{"name":"p"},"spec":{}}`,
	entries: []Entry{{Path: "/metadata/labels/app", Original: json.RawMessage(`"web"`)}},
	want:    `{"metadata":{"name":"p","labels":{"app":"web"}},"spec":{}}`,
}, {
	name:   "all tolerations stripped, none stored: the list is made again",
	stored: `{"metadata":{"name":"p"},"spec":{}}`,
	entries: []Entry{
		{Op: OpInsert, Path: "/spec/tolerations/1", Original: json.RawMessage(`{"key":"b"}`)},
		{Op: OpInsert, Path: "/spec/tolerations/0", Original: json.RawMessage(`{"key":"a"}`)},
	},
	want: `{"metadata":{"name":"p"},"spec":{"tolerations":[{"key":"a"},{"key":"b"}]}}`,
}, {
	name:   "all tolerations stripped, the host added its defaults again: none twice",
	stored: `{"metadata":{"name":"p"},"spec":{"tolerations":[{"key":"nr","tolerationSeconds":300},{"key":"ur","tolerationSeconds":300}]}}`,
	entries: []Entry{
		{Op: OpInsert, Path: "/spec/tolerations/2", Original: json.RawMessage(`{"key":"mine"}`), Len: new(0)},
		{Op: OpInsert, Path: "/spec/tolerations/1", Original: json.RawMessage(`{"tolerationSeconds":300,"key":"ur"}`), Len: new(0)},
		{Op: OpInsert, Path: "/spec/tolerations/0", Original: json.RawMessage(`{"key":"nr","tolerationSeconds":300}`), Len: new(0)},
	},
	want:    `{"metadata":{"name":"p"},"spec":{"tolerations":[{"key":"nr","tolerationSeconds":300},{"key":"ur","tolerationSeconds":300},{"key":"mine"}]}}`,
	skipped: map[string]int{SkipHeld: 2},
}, {
	name:   "two equal elements stripped, the host holds one: one is inserted",
	stored: `{"spec":{"l":["x"]}}`,
	entries: []Entry{
		{Op: OpInsert, Path: "/spec/l/1", Original: json.RawMessage(`"x"`)},
		{Op: OpInsert, Path: "/spec/l/0", Original: json.RawMessage(`"x"`)},
	},
	want:    `{"spec":{"l":["x","x"]}}`,
	skipped: map[string]int{SkipHeld: 1},
}, {
	name:   "one of two equal elements stripped, the other left in place: it is put back",
	stored: `{"spec":{"l":["x","y"]}}`,
	entries: []Entry{
		{Op: OpInsert, Path: "/spec/l/1", Original: json.RawMessage(`"x"`), Len: new(2)},
	},
	want: `{"spec":{"l":["x","x","y"]}}`,
}, {
	name:    "the hooks removed the whole list, the host filled it: the syncer's elements go back, none twice",
	stored:  `{"spec":{"tolerations":[{"key":"nr"},{"key":"host"}]}}`,
	entries: []Entry{{Path: "/spec/tolerations", Original: json.RawMessage(`[{"key":"mine"},{"key":"nr"}]`)}},
	want:    `{"spec":{"tolerations":[{"key":"mine"},{"key":"nr"},{"key":"host"}]}}`,
	skipped: map[string]int{SkipHeld: 1},
}, {
	name:    "the hooks removed the whole labels map, the host added a label: the syncer's labels go back beside it",
	stored:  `{"metadata":{"labels":{"host":"x","app":"other"}}}`,
	entries: []Entry{{Path: "/metadata/labels", Original: json.RawMessage(`{"app":"web","tier":"front"}`)}},
	want:    `{"metadata":{"labels":{"host":"x","app":"other","tier":"front"}}}`,
	skipped: map[string]int{SkipChanged: 1},
}, {
	name:    "an index past the end, as the host left the array, appends",
	stored:  `{"spec":{"l":["h"]}}`,
	entries: []Entry{{Op: OpInsert, Path: "/spec/l/5", Original: json.RawMessage(`"mine"`)}},
	want:    `{"spec":{"l":["h","mine"]}}`,
}, {
	name:    "a nested object dropped on the way: every missing object is made",
	stored:  `{"spec":{}}`,
	entries: []Entry{{Path: "/spec/template/metadata/labels/app", Original: json.RawMessage(`"web"`)}},
	want:    `{"spec":{"template":{"metadata":{"labels":{"app":"web"}}}}}`,
}, {
	name:    "the host changed the value: it stays",
	stored:  `{"metadata":{"labels":{"app":"host"}}}`,
	entries: []Entry{{Path: "/metadata/labels/app", Hooked: json.RawMessage(`"hook"`), Original: json.RawMessage(`"web"`)}},
	want:    `{"metadata":{"labels":{"app":"host"}}}`,
	skipped: map[string]int{SkipChanged: 1},
}, {
	name:    "a securityContext the hooks made, a host webhook added seccompProfile: the hooks' field goes, the host's stays",
	stored:  `{"spec":{"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}}}}`,
	entries: []Entry{{Path: "/spec/securityContext", Hooked: json.RawMessage(`{"runAsNonRoot":true}`)}},
	want:    `{"spec":{"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}}`,
}, {
	name:    "a nodeSelector the hooks made, the host added kubernetes.io/os",
	stored:  `{"spec":{"nodeSelector":{"disktype":"ssd","kubernetes.io/os":"linux"}}}`,
	entries: []Entry{{Path: "/spec/nodeSelector", Hooked: json.RawMessage(`{"disktype":"ssd"}`)}},
	want:    `{"spec":{"nodeSelector":{"kubernetes.io/os":"linux"}}}`,
}, {
	name:    "tolerations the hooks made, the host added its defaults and defaulted a field into the hooks' element",
	stored:  `{"spec":{"tolerations":[{"key":"dedicated","operator":"Equal","value":"tenant","effect":"NoSchedule"},{"key":"nr","tolerationSeconds":300},{"key":"ur","tolerationSeconds":300}]}}`,
	entries: []Entry{{Path: "/spec/tolerations", Hooked: json.RawMessage(`[{"key":"dedicated","value":"tenant","effect":"NoSchedule"}]`)}},
	want:    `{"spec":{"tolerations":[{"key":"nr","tolerationSeconds":300},{"key":"ur","tolerationSeconds":300}]}}`,
}, {
	name:    "labels the hooks made on an unlabelled object, a host webhook added one",
	stored:  `{"metadata":{"labels":{"team":"a","host":"x"}}}`,
	entries: []Entry{{Path: "/metadata/labels", Hooked: json.RawMessage(`{"team":"a"}`)}},
	want:    `{"metadata":{"labels":{"host":"x"}}}`,
}, {
	name:    "a nested object the hooks made with a field inside, the host defaulted fields into it: down to what the hooks wrote",
	stored:  `{"spec":{"tuning":{"mode":"fast","limits":{"cpu":"2","burst":"4"},"retries":3}}}`,
	entries: []Entry{{Path: "/spec/tuning", Hooked: json.RawMessage(`{"mode":"fast","limits":{"cpu":"2"}}`)}},
	want:    `{"spec":{"tuning":{"limits":{"burst":"4"},"retries":3}}}`,
}, {
	name:    "a parent the hooks made whose field the host changed: the host's value stays",
	stored:  `{"spec":{"nodeSelector":{"disktype":"hdd"}}}`,
	entries: []Entry{{Path: "/spec/nodeSelector", Hooked: json.RawMessage(`{"disktype":"ssd"}`)}},
	want:    `{"spec":{"nodeSelector":{"disktype":"hdd"}}}`,
	skipped: map[string]int{SkipChanged: 1},
}, {
	name:    "a parent the hooks made, stored as they wrote it: it goes",
	stored:  `{"spec":{"nodeSelector":{"disktype":"ssd"}}}`,
	entries: []Entry{{Path: "/spec/nodeSelector", Hooked: json.RawMessage(`{"disktype":"ssd"}`)}},
	want:    `{"spec":{}}`,
}, {
	name:    "an ancestor that is not an object: no place",
	stored:  `{"spec":"text"}`,
	entries: []Entry{{Path: "/spec/nodeSelector/zone", Original: json.RawMessage(`"a"`)}},
	want:    `{"spec":"text"}`,
	skipped: map[string]int{SkipNoPlace: 1},
}, {
	name:    "a missing element of an array on the way: no place",
	stored:  `{"spec":{"containers":[]}}`,
	entries: []Entry{{Path: "/spec/containers/0/env/0", Op: OpInsert, Original: json.RawMessage(`{"name":"A"}`)}},
	want:    `{"spec":{"containers":[]}}`,
	skipped: map[string]int{SkipNoPlace: 1},
}}

// withAnnotation returns the stored object with an Annotation (any value: Apply removes it).
func withAnnotation(t *testing.T, raw string) []byte {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		t.Fatal(err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[Annotation] = "x"
	b, _ := json.Marshal(obj)
	return b
}

func TestApplyRestoresIntoWhatTheHostStores(t *testing.T) {
	for _, c := range applyCases {
		t.Run(c.name, func(t *testing.T) {
			steps, reason := parseSteps(c.entries)
			if reason != "" {
				t.Fatal(reason)
			}
			raw := withAnnotation(t, c.stored)
			want := c.want
			// the Doc of reads and the tree oracle alike
			doc := jsondoc.New(raw)
			res := Apply(context.Background(), doc, steps)
			got, err := doc.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			tree, err := DecodeTree(raw)
			if err != nil {
				t.Fatal(err)
			}
			treeRes := Apply(context.Background(), tree, steps)
			treeGot, _ := json.Marshal(tree.V)
			for name, g := range map[string][]byte{"jsondoc": got, "tree": treeGot} {
				if !same(t, g, withoutEmptyAnnotations(t, []byte(want), g)) {
					t.Errorf("%s: read gives\n%s\nwant\n%s", name, g, want)
				}
			}
			if res.Reason != "" || !reflect.DeepEqual(res, treeRes) || !reflect.DeepEqual(res.Skipped, c.skipped) {
				t.Errorf("result %+v (tree %+v), want skipped %v", res, treeRes, c.skipped)
			}
		})
	}
}

// withoutEmptyAnnotations returns want with "annotations":{} in metadata when got has it (the
// Annotation's map, left empty by Apply: what else takes it off is the recorded undo's).
func withoutEmptyAnnotations(t *testing.T, want, got []byte) []byte {
	t.Helper()
	var g, w map[string]any
	_ = json.Unmarshal(got, &g)
	_ = json.Unmarshal(want, &w)
	if gm, ok := g["metadata"].(map[string]any); ok {
		if a, ok := gm["annotations"].(map[string]any); ok && len(a) == 0 {
			wm, _ := w["metadata"].(map[string]any)
			if wm == nil {
				wm = map[string]any{}
				w["metadata"] = wm
			}
			wm["annotations"] = map[string]any{}
		}
	}
	b, _ := json.Marshal(w)
	return b
}
