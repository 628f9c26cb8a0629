package builtin_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/synchook/synchook/builtin"
)

func TestExpandPath(t *testing.T) {
	lens := map[string]int{"/a": 3, "/a/0/b": 0, "/a/1/b": 2, "/a/2/b": 1, "/empty": 0}
	lenAt := func(prefix []string) (int, bool) {
		n, ok := lens["/"+strings.Join(prefix, "/")]
		return n, ok
	}
	for _, tt := range []struct {
		path string
		want []string
	}{
		{"/x/y", []string{"/x/y"}},
		{"/a/*", []string{"/a/2", "/a/1", "/a/0"}}, // the last first: removing them in order shifts nothing still to come
		{"/a/*/c", []string{"/a/2/c", "/a/1/c", "/a/0/c"}},
		{"/a/*/b/*", []string{"/a/2/b/0", "/a/1/b/1", "/a/1/b/0"}},
		{"/o/*/c", []string{"/o/*/c"}}, // no array there: the literal key "*"
		{"/empty/*/c", nil},
	} {
		tokens, _ := builtin.ParsePointer(tt.path)
		var got []string
		for _, p := range builtin.ExpandPath(tokens, lenAt) {
			got = append(got, "/"+strings.Join(p, "/"))
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ExpandPath(%s) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// spreadPod is a Pod whose topology spread constraints use matchLabelKeys, as a tenant's pod on
// Kubernetes 1.34+ has them once its apiserver filled the selector (vcluster #3668, #3684).
func spreadPod() *corev1.Pod {
	c := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MatchLabelKeys: []string{"pod-template-hash"},
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Annotations: map[string]string{"*": "a key of one asterisk"}},
		Spec: corev1.PodSpec{
			Containers:                []corev1.Container{{Name: "a", Image: "nginx"}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{c("zone"), c("kubernetes.io/hostname")},
			Tolerations:               []corev1.Toleration{{Key: "a"}, {Key: "b"}},
		},
	}
}

func TestAWildcardStripsEveryElement(t *testing.T) {
	fn, err := builtin.StripFunc(builtin.Strip{Paths: []string{
		"/spec/topologySpreadConstraints/*/matchLabelKeys", "/spec/tolerations/*", "/metadata/annotations/*", "/spec/volumes/*/name",
	}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, pod *corev1.Pod) {
		for i, c := range pod.Spec.TopologySpreadConstraints {
			if c.MatchLabelKeys != nil || c.TopologyKey == "" || c.LabelSelector == nil {
				t.Errorf("constraint %d: %+v, want matchLabelKeys gone and the rest kept", i, c)
			}
		}
		if len(pod.Spec.TopologySpreadConstraints) != 2 || len(pod.Spec.Tolerations) != 0 || len(pod.Annotations) != 0 {
			t.Errorf("constraints %d (want 2), tolerations %v (want none), annotations %v (want the key \"*\" gone)",
				len(pod.Spec.TopologySpreadConstraints), pod.Spec.Tolerations, pod.Annotations)
		}
	}
	t.Run("typed", func(t *testing.T) {
		out, err := fn(t.Context(), spreadPod())
		if err != nil {
			t.Fatal(err)
		}
		check(t, out.(*corev1.Pod))
	})
	t.Run("unstructured", func(t *testing.T) {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spreadPod())
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: content}
		if _, err := fn(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
			t.Fatal(err)
		}
		check(t, pod)
	})
}

func TestCheckStripPathForNamesTheStepThatNeverMatches(t *testing.T) {
	for path, want := range map[string]string{
		"/spec/topologySpreadConstraints/*/matchLabelKeys": "",
		"/spec/containers/0/env/*/valueFrom":               "",
		"/metadata/annotations/*":                          "", // a map: the literal key
		"/spec/newerField/*/x":                             "", // a field of a newer Kubernetes: not judged
		"/spec/containers/0/resources/limits/cpu/x":        "", // below a value that encodes itself: not judged
		"/spec/*/nodeName":                                 `step 2 "*" never matches: "/spec" is an object (v1.PodSpec)`,
		"/spec/containers/name":                            `step 3 "name" never matches: "/spec/containers" is an array: a step there is an index or "*"`,
		"/spec/nodeName/x":                                 `step 3 "x" never matches: "/spec/nodeName" is a string`,
		"/spec/containers/*/ports/*/containerPort/x":       `step 7 "x" never matches: "/spec/containers/*/ports/*/containerPort" is a number`,
		"/spec/a~2": `step 2 "a~2": "~" must be followed by 0 or 1`,
	} {
		err := builtin.CheckStripPathFor(&corev1.Pod{}, path)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, builtin.ErrInvalidPointer)) {
			t.Errorf("CheckStripPathFor(Pod, %s) = %v, want %q", path, err, want)
		}
	}
}

// The strip of the issue's own case keeps what the host accepts: the constraints without
// matchLabelKeys encode as the tenant wrote them otherwise.
func TestAWildcardStripKeepsTheRestOfEachElement(t *testing.T) {
	fn, _ := builtin.StripFunc(builtin.Strip{Paths: []string{"/spec/topologySpreadConstraints/*/matchLabelKeys"}})
	out, err := fn(t.Context(), spreadPod())
	if err != nil {
		t.Fatal(err)
	}
	want := spreadPod()
	for i := range want.Spec.TopologySpreadConstraints {
		want.Spec.TopologySpreadConstraints[i].MatchLabelKeys = nil
	}
	g, _ := json.Marshal(out)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("got\n%s\nwant\n%s", g, w)
	}
}
