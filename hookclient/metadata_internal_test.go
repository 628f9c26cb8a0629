package hookclient

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/patch"
)

// viaJSON is the reference: encode obj, apply the patch with the JSON Patch library, decode.
func viaJSON(t *testing.T, obj *corev1.Pod, p []byte) (*corev1.Pod, error) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := patch.Apply(raw, p)
	if err != nil {
		return nil, err
	}
	out := &corev1.Pod{}
	return out, kjson.UnmarshalCaseSensitivePreserveInts(patched, out)
}

func metadataPod(labels, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: labels, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

// checkApplyToMetadata: when applyToMetadata takes a patch, the object is exactly what the
// JSON path gives; when the JSON path fails, applyToMetadata refuses and leaves obj untouched.
func checkApplyToMetadata(t *testing.T, labels, annotations map[string]string, p []byte) (taken bool) {
	t.Helper()
	var ops []itemOperation
	if kjson.UnmarshalCaseSensitivePreserveInts(p, &ops) != nil {
		return false
	}
	obj := metadataPod(labels, annotations)
	orig := obj.DeepCopy()
	want, wantErr := viaJSON(t, obj, p)
	if !applyToMetadata(obj, ops) {
		if gotJSON, _ := json.Marshal(obj); string(gotJSON) != string(must(json.Marshal(orig))) {
			t.Fatalf("refused %s but changed the object to %s", p, gotJSON)
		}
		return false
	}
	if wantErr != nil {
		t.Fatalf("took %s, which the JSON path rejects: %v", p, wantErr)
	}
	got, _ := json.Marshal(obj)
	if w, _ := json.Marshal(want); string(got) != string(w) {
		t.Fatalf("patch %s on labels %v annotations %v:\n got %s\nwant %s", p, labels, annotations, got, w)
	}
	// Beyond the JSON, a map the patch touched is nil exactly when decoding gives nil; a map it
	// did not touch is left as it was (an empty map stays empty, where a round trip gives nil).
	touched := func(prefix string) bool {
		for _, op := range ops {
			if strings.HasPrefix(op.Path, prefix) {
				return true
			}
		}
		return false
	}
	if touched("/metadata/labels") && (obj.Labels == nil) != (want.Labels == nil) ||
		touched("/metadata/annotations") && (obj.Annotations == nil) != (want.Annotations == nil) {
		t.Fatalf("patch %s: nil maps differ: got %#v %#v, want %#v %#v", p, obj.Labels, obj.Annotations, want.Labels, want.Annotations)
	}
	if !maps.Equal(labels, orig.Labels) || !maps.Equal(annotations, orig.Annotations) {
		t.Fatalf("patch %s changed the maps it was given in place", p)
	}
	return true
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestApplyToMetadata(t *testing.T) {
	two := map[string]string{"app": "web", "a/b~c": "x"}
	cases := []struct {
		name      string
		labels    map[string]string
		patch     string
		wantTaken bool
	}{
		{"add an entry", two, `[{"op":"add","path":"/metadata/labels/synchook.io~1hooked","value":"true"}]`, true},
		{"replace an entry with escapes", two, `[{"op":"replace","path":"/metadata/labels/a~1b~0c","value":"y"}]`, true},
		{"remove an entry", two, `[{"op":"remove","path":"/metadata/labels/app"}]`, true},
		{"add the whole map", nil, `[{"op":"add","path":"/metadata/labels","value":{"x":"1"}}]`, true},
		{"remove the whole map", two, `[{"op":"remove","path":"/metadata/labels"}]`, true},
		{"add and then annotate", two, `[{"op":"add","path":"/metadata/labels/z","value":"1"},{"op":"add","path":"/metadata/annotations","value":{"n":"v"}}]`, true},
		{"an entry of an absent map goes the JSON way", nil, `[{"op":"add","path":"/metadata/labels/x","value":"1"}]`, false},
		{"replace of a missing key goes the JSON way", two, `[{"op":"replace","path":"/metadata/labels/nope","value":"1"}]`, false},
		{"a non-string value goes the JSON way", two, `[{"op":"add","path":"/metadata/labels/x","value":1}]`, false},
		{"another field goes the JSON way", two, `[{"op":"add","path":"/metadata/labels/x","value":"1"},{"op":"replace","path":"/spec/containers/0/image","value":"busybox"}]`, false},
		{"move goes the JSON way", two, `[{"op":"move","from":"/metadata/labels/app","path":"/metadata/labels/b"}]`, false},
		{"a bad escape goes the JSON way", two, `[{"op":"add","path":"/metadata/labels/a~2","value":"1"}]`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if taken := checkApplyToMetadata(t, tc.labels, map[string]string{"keep": "me"}, []byte(tc.patch)); taken != tc.wantTaken {
				t.Errorf("taken = %v, want %v", taken, tc.wantTaken)
			}
		})
	}
}

// FuzzApplyToMetadata checks applyToMetadata against encode → JSON Patch library → decode on
// arbitrary patches over a few label and annotation maps.
func FuzzApplyToMetadata(f *testing.F) {
	f.Add(uint8(0), `[{"op":"add","path":"/metadata/labels/x","value":"1"}]`)
	f.Add(uint8(1), `[{"op":"remove","path":"/metadata/labels/a"},{"op":"add","path":"/metadata/labels/a","value":"2"}]`)
	f.Add(uint8(2), `[{"op":"replace","path":"/metadata/annotations","value":{}},{"op":"add","path":"/metadata/annotations/k","value":"v"}]`)
	f.Add(uint8(3), `[{"op":"remove","path":"/metadata/annotations/k"},{"op":"remove","path":"/metadata/annotations"}]`)
	f.Add(uint8(0), `[{"op":"add","path":"/metadata/labels","value":null}]`)
	f.Fuzz(func(t *testing.T, shape uint8, p string) {
		var labels, annotations map[string]string
		switch shape % 4 {
		case 1:
			labels = map[string]string{"a": "1"}
		case 2:
			labels, annotations = map[string]string{}, map[string]string{"k": "v", "~/": "x"}
		case 3:
			annotations = map[string]string{"k": "v"}
		}
		checkApplyToMetadata(t, labels, annotations, []byte(p))
	})
}
