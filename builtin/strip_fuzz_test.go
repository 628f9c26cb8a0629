package builtin_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/internal/fixtures"
)

// FuzzStripTyped strips a path the fuzzer gives from a Pod it gives, along the Go type (the
// strip hook) and through the unstructured form (builtin.StripThroughUnstructured, the oracle):
// both must give the same JSON.
func FuzzStripTyped(f *testing.F) {
	pod := fixtures.JSON(fixtures.Pod("ns", "web"))
	for _, p := range []string{
		"/spec/schedulerName", "/spec/containers/1", "/spec/containers/0/env/5/valueFrom", "/metadata/labels/app.example.com~1label-3",
		"/spec/containers/0/resources/limits/cpu", "/status", "/metadata/creationTimestamp", "/spec/containers/0/ports/0/containerPort", "/spec/containers/0/livenessProbe/httpGet/port",
		"/metadata/ownerReferences/0/uid", "/spec/tolerations/0/key", "/spec/volumes/0/configMap/name", "/spec/nope", "/spec/containers/9/name",
		"/spec/containers/*/env/*/valueFrom", "/spec/tolerations/*", "/spec/containers/*/resources/limits/cpu", "/metadata/labels/*", "/spec/containers/*/ports/*",
	} {
		f.Add(pod, p)
	}
	f.Fuzz(func(t *testing.T, raw []byte, path string) {
		tokens, err := builtin.ParseStripPath(path)
		if err != nil || len(tokens) == 0 {
			t.Skip()
		}
		in := &corev1.Pod{}
		if json.Unmarshal(raw, in) != nil {
			t.Skip()
		}
		fn, err := builtin.StripFunc(builtin.Strip{Paths: []string{path}})
		if err != nil {
			t.Skip()
		}
		oracle, err := builtin.StripThroughUnstructured(in.DeepCopy(), [][]string{tokens})
		if err != nil {
			t.Skip() // the unstructured converter refuses the object
		}
		got, err := fn(t.Context(), in.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(oracle)
		if string(g) != string(w) {
			t.Fatalf("strip %s along the Go type gives\n%s\nthrough the unstructured form\n%s", path, g, w)
		}
	})
}
