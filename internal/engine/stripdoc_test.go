package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/hoststore"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// FuzzStripDoc strips paths the fuzzer gives from a Pod it gives two ways: a chain of
// builtin.StripHook (the document path: removals on the object's JSON) and the same strip as a
// plain typed hook (the typed path, its oracle). Both must give the same Pod, as a syncer
// decodes it, and the read of each write must give the syncer back what it sent.
func FuzzStripDoc(f *testing.F) {
	pod := fixtures.JSON(fixtures.Pod("ns", "web"))
	f.Add(pod, "/spec/schedulerName,/status/hostIP")
	f.Add(pod, "/spec/containers/0,/metadata/labels/app.example.com~1label-1")
	f.Add(pod, "/status,/spec/containers/1/env/2/value,/spec/nope")
	f.Add(pod, "/spec/containers/*/env/*/valueFrom,/spec/tolerations/*")
	f.Add(pod, "/spec/containers/*/ports/*/containerPort,/metadata/labels/*,/spec/volumes/*")
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"containers":[{"name":"a","image":"i"}],`+
		`"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","matchLabelKeys":["pod-template-hash"]},`+
		`{"maxSkew":1,"topologyKey":"host","whenUnsatisfiable":"DoNotSchedule","matchLabelKeys":["a","b"]}]}}`), "/spec/topologySpreadConstraints/*/matchLabelKeys")
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"synchook.io/undo":"x"}},"spec":{"nodeName":"n"}}`), "/spec/nodeName")
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","unknown":1}]}}`), "/spec/containers/0/name")
	ring, err := undo.GenerateRing()
	if err != nil {
		f.Fatal(err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	f.Fuzz(func(t *testing.T, raw []byte, paths string) {
		s := builtin.Strip{Paths: strings.Split(paths, ",")}
		for _, p := range s.Paths {
			if builtin.CheckStripPath(p) != nil || p == "" || strings.HasPrefix(p, "/metadata/annotations") {
				t.Skip() // the paths config accepts (a strip of the undo annotation: the typed path's own business)
			}
		}
		types := []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}
		doc, err := builtin.NewStripHook("strip", &corev1.Pod{}, types, s, builtin.Filter{})
		if err != nil {
			t.Skip()
		}
		fn, _ := builtin.StripFunc(s)
		var p corev1.Pod
		if json.Unmarshal(raw, &p) != nil {
			t.Skip() // an object the schema refuses: the typed path refuses it, the document path only
			// checks JSON and metadata (docs/guarantees.md)
		}
		results := map[string][]byte{}
		for _, name := range []string{"typed", "document"} {
			h := hooks.ClientHook(doc)
			if name == "typed" {
				h = hooks.NewFunc("strip", &corev1.Pod{}, types, fn)
			}
			reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
			if err := reg.RegisterBuiltin(h, "r1"); err != nil {
				t.Fatal(err)
			}
			res, err := reg.Mutate(context.Background(), gvk, hooks.CreatePhysical, raw)
			if err != nil {
				if name == "typed" {
					t.Skip() // refused by the typed decode (kjson is stricter than encoding/json)
				}
				t.Fatalf("%s: %v, the typed path took it", name, err)
			}
			written, err := res.Object()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			results[name] = typedJSON(t, written)
			// the host stores a Create with its own creationTimestamp (a Create's seal opens
			// only on an object created within undo.NameBindWindow of it)
			now := time.Now()
			read, err := reg.Mutate(context.Background(), gvk, hooks.GetPhysical, hoststore.Created(written, now))
			if err != nil {
				t.Fatalf("%s: read: %v", name, err)
			}
			back, err := read.Object()
			if err != nil {
				t.Fatalf("%s: read: %v", name, err)
			}
			if sent := hoststore.Created(raw, now); res.Patch != nil && string(syncerView(t, back)) != string(syncerView(t, sent)) {
				t.Fatalf("%s: the read gives\n%s\nnot what the syncer sent\n%s", name, syncerView(t, back), syncerView(t, sent))
			}
			var w corev1.Pod
			_ = json.Unmarshal(written, &w)
			if v, ok := w.Annotations[undo.Annotation]; ok && !strings.HasPrefix(v, "s2.") {
				t.Fatalf("%s: the host object keeps the tenant's %s %q", name, undo.Annotation, v)
			}
			if res.Patch != nil {
				if _, err := patch.Apply(raw, res.Patch); err != nil {
					t.Fatalf("%s: the patch does not apply: %v", name, err)
				}
			}
		}
		if string(results["document"]) != string(results["typed"]) {
			t.Fatalf("the document path gives\n%s\nthe typed path\n%s", results["document"], results["typed"])
		}
	})
}

// syncerView returns the JSON of raw decoded into a Pod: what the syncer sees of it.
func syncerView(t *testing.T, raw []byte) []byte {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(&p)
	return b
}

// typedJSON is syncerView without the undo annotation: the seal aside.
func typedJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	delete(p.Annotations, undo.Annotation)
	if len(p.Annotations) == 0 {
		p.Annotations = nil
	}
	b, _ := json.Marshal(&p)
	return b
}

// TestTheDocumentPathLeavesAMalformedParentToTheTypedDecode: a strip path through a value that
// is a scalar where the kind has an object (a Pod whose spec is a string) is refused as the
// typed path refuses it, not passed through because the path is absent.
func TestTheDocumentPathLeavesAMalformedParentToTheTypedDecode(t *testing.T) {
	h, err := builtin.NewStripHook("strip", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, builtin.Strip{Paths: []string{"/spec/nodeName"}}, builtin.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry(nil)
	if err := reg.RegisterBuiltin(h, "r1"); err != nil {
		t.Fatal(err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	_, err = reg.Mutate(t.Context(), gvk, hooks.GetPhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":"not-an-object"}`))
	var de *failure.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v, want a DecodeError", err)
	}
	for _, ok := range []string{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}}`, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":null}`, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`} {
		if res, err := reg.Mutate(t.Context(), gvk, hooks.GetPhysical, []byte(ok)); err != nil || res.Patch != nil {
			t.Errorf("%s: patch %s, %v; want no change", ok, res.Patch, err)
		}
	}
}
