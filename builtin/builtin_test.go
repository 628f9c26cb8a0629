package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/patch"
)

// newPod returns a Pod with a label, an annotation whose key holds a "/", two containers and a
// status, as the syncer would send it.
func newPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "team-a", UID: "1234",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"host.example.com/internal": "x", "keep": "y"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app", Image: "app:1"},
			{Name: "sidecar", Image: "sidecar:1"},
		}},
		Status: corev1.PodStatus{HostIP: "10.0.0.1", PodIP: "10.1.0.1"},
	}
}

// newWidget returns a custom resource the scheme does not know.
func newWidget() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"name": "w", "namespace": "team-a",
			"labels":      map[string]any{"app": "w"},
			"annotations": map[string]any{"host.example.com/internal": "x"},
		},
		"spec": map[string]any{
			"size":  int64(3),
			"items": []any{map[string]any{"name": "a", "secret": "s"}, map[string]any{"name": "b"}},
		},
		"status": map[string]any{"phase": "Ready", "hostIP": "10.0.0.1"},
	}}
}

func TestLabelsFunc(t *testing.T) {
	settings := builtin.Labels{
		Labels:      map[string]string{"team": "a", "tier": "back"},
		Annotations: map[string]string{"owner": "team-a"},
	}
	tests := []struct {
		name            string
		obj             client.Object
		wantLabels      map[string]string
		wantAnnotations map[string]string
	}{
		{
			name:            "a typed Pod keeps its labels and gets the new ones, overwriting tier",
			obj:             newPod(),
			wantLabels:      map[string]string{"app": "web", "tier": "back", "team": "a"},
			wantAnnotations: map[string]string{"host.example.com/internal": "x", "keep": "y", "owner": "team-a"},
		},
		{
			name:            "a typed Pod without labels or annotations gets both maps created",
			obj:             &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}},
			wantLabels:      map[string]string{"team": "a", "tier": "back"},
			wantAnnotations: map[string]string{"owner": "team-a"},
		},
		{
			name:            "an unstructured custom resource gets the labels and annotations",
			obj:             newWidget(),
			wantLabels:      map[string]string{"app": "w", "team": "a", "tier": "back"},
			wantAnnotations: map[string]string{"host.example.com/internal": "x", "owner": "team-a"},
		},
		{
			name: "an unstructured object without metadata gets metadata created",
			obj: &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1", "kind": "Widget",
			}},
			wantLabels:      map[string]string{"team": "a", "tier": "back"},
			wantAnnotations: map[string]string{"owner": "team-a"},
		},
	}
	fn := builtin.LabelsFunc(settings)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := fn(t.Context(), tt.obj)
			if err != nil {
				t.Fatalf("LabelsFunc: %v", err)
			}
			if out != tt.obj {
				t.Errorf("LabelsFunc returned a different object; want the same one changed in place")
			}
			if got := out.GetLabels(); !reflect.DeepEqual(got, tt.wantLabels) {
				t.Errorf("labels = %v, want %v", got, tt.wantLabels)
			}
			if got := out.GetAnnotations(); !reflect.DeepEqual(got, tt.wantAnnotations) {
				t.Errorf("annotations = %v, want %v", got, tt.wantAnnotations)
			}
		})
	}
}

func TestLabelsFuncCopiesSettings(t *testing.T) {
	settings := builtin.Labels{Labels: map[string]string{"team": "a"}}
	fn := builtin.LabelsFunc(settings)
	settings.Labels["team"] = "changed"
	out, err := fn(t.Context(), &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.GetLabels()["team"]; got != "a" {
		t.Errorf("label team = %q after the caller changed the settings map, want %q", got, "a")
	}
}

func TestLabelsFuncRejectsMalformedMetadata(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"labels": "not-a-map"},
	}}
	_, err := builtin.LabelsFunc(builtin.Labels{Labels: map[string]string{"a": "b"}})(t.Context(), obj)
	if err == nil || !strings.Contains(err.Error(), "metadata.labels") {
		t.Errorf("error = %v, want one naming metadata.labels", err)
	}
}

func TestStripFuncTyped(t *testing.T) {
	tests := []struct {
		name    string
		paths   []string
		check   func(t *testing.T, pod *corev1.Pod)
		changed bool
	}{
		{
			name:    "a label is removed and the others stay",
			paths:   []string{"/metadata/labels/tier"},
			changed: true,
			check: func(t *testing.T, pod *corev1.Pod) {
				if want := map[string]string{"app": "web"}; !reflect.DeepEqual(pod.Labels, want) {
					t.Errorf("labels = %v, want %v", pod.Labels, want)
				}
			},
		},
		{
			name:    "an annotation whose key holds a slash is removed with ~1",
			paths:   []string{"/metadata/annotations/host.example.com~1internal"},
			changed: true,
			check: func(t *testing.T, pod *corev1.Pod) {
				if want := map[string]string{"keep": "y"}; !reflect.DeepEqual(pod.Annotations, want) {
					t.Errorf("annotations = %v, want %v", pod.Annotations, want)
				}
			},
		},
		{
			name:    "a status field is removed",
			paths:   []string{"/status/hostIP"},
			changed: true,
			check: func(t *testing.T, pod *corev1.Pod) {
				if pod.Status.HostIP != "" || pod.Status.PodIP != "10.1.0.1" {
					t.Errorf("status = %+v, want hostIP gone and podIP kept", pod.Status)
				}
			},
		},
		{
			name:    "an array element is removed and the next one moves up",
			paths:   []string{"/spec/containers/0"},
			changed: true,
			check: func(t *testing.T, pod *corev1.Pod) {
				if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != "sidecar" {
					t.Errorf("containers = %+v, want only sidecar", pod.Spec.Containers)
				}
			},
		},
		{
			name:    "a field inside an array element is removed",
			paths:   []string{"/spec/containers/1/image"},
			changed: true,
			check: func(t *testing.T, pod *corev1.Pod) {
				if pod.Spec.Containers[1].Image != "" || pod.Spec.Containers[0].Image != "app:1" {
					t.Errorf("containers = %+v, want sidecar image gone", pod.Spec.Containers)
				}
			},
		},
		{
			name:  "a missing field, a missing parent and an index out of range change nothing",
			paths: []string{"/metadata/labels/nope", "/spec/nope/deeper", "/spec/containers/7", "/spec/containers/-", "/metadata/name/x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := builtin.StripFunc(builtin.Strip{Paths: tt.paths})
			if err != nil {
				t.Fatalf("StripFunc: %v", err)
			}
			in := newPod()
			out, err := fn(t.Context(), in)
			if err != nil {
				t.Fatalf("strip: %v", err)
			}
			pod, ok := out.(*corev1.Pod)
			if !ok {
				t.Fatalf("strip returned %T, want *corev1.Pod", out)
			}
			if !tt.changed {
				if out != in || !reflect.DeepEqual(in, newPod()) {
					t.Errorf("strip changed the object or returned a new one; want it untouched")
				}
				return
			}
			if out != in {
				t.Errorf("strip returned a new object; want the typed object changed in place")
			}
			if pod.Name != "web" || pod.Namespace != "team-a" || pod.UID != "1234" || pod.Kind != "Pod" || pod.APIVersion != "v1" {
				t.Errorf("identity changed: %+v %+v", pod.TypeMeta, pod.ObjectMeta)
			}
			tt.check(t, pod)
		})
	}
}

func TestStripFuncUnstructured(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		want  func() map[string]any
	}{
		{
			name:  "a label, an escaped annotation and a status field are removed",
			paths: []string{"/metadata/labels/app", "/metadata/annotations/host.example.com~1internal", "/status/hostIP"},
			want: func() map[string]any {
				w := newWidget().Object
				w["metadata"].(map[string]any)["labels"] = map[string]any{}
				w["metadata"].(map[string]any)["annotations"] = map[string]any{}
				delete(w["status"].(map[string]any), "hostIP")
				return w
			},
		},
		{
			name:  "an array element and a field of another element are removed, in order",
			paths: []string{"/spec/items/0/secret", "/spec/items/1"},
			want: func() map[string]any {
				w := newWidget().Object
				w["spec"].(map[string]any)["items"] = []any{map[string]any{"name": "a"}}
				return w
			},
		},
		{
			name:  "paths below a scalar, a missing key or a non-numeric index change nothing",
			paths: []string{"/spec/size/x", "/spec/missing", "/spec/items/first", "/spec/items/01"},
			want:  func() map[string]any { return newWidget().Object },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := builtin.StripFunc(builtin.Strip{Paths: tt.paths})
			if err != nil {
				t.Fatalf("StripFunc: %v", err)
			}
			in := newWidget()
			out, err := fn(t.Context(), in)
			if err != nil {
				t.Fatalf("strip: %v", err)
			}
			if out != client.Object(in) {
				t.Errorf("strip returned a new object; want the Unstructured changed in place")
			}
			if got, want := out.(*unstructured.Unstructured).Object, tt.want(); !reflect.DeepEqual(got, want) {
				t.Errorf("object = %v\nwant %v", got, want)
			}
		})
	}
}

func TestStripFuncRefusesPaths(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{name: "the whole document is refused", path: "", wantErr: builtin.ErrProtectedPath},
		{name: "apiVersion is refused", path: "/apiVersion", wantErr: builtin.ErrProtectedPath},
		{name: "kind is refused", path: "/kind", wantErr: builtin.ErrProtectedPath},
		{name: "metadata is refused as the parent of the name", path: "/metadata", wantErr: builtin.ErrProtectedPath},
		{name: "the name is refused", path: "/metadata/name", wantErr: builtin.ErrProtectedPath},
		{name: "the namespace is refused", path: "/metadata/namespace", wantErr: builtin.ErrProtectedPath},
		{name: "the uid is refused", path: "/metadata/uid", wantErr: builtin.ErrProtectedPath},
		{name: "a pointer without a leading slash is refused", path: "metadata/labels", wantErr: builtin.ErrInvalidPointer},
		{name: "a bad escape is refused", path: "/metadata/annotations/a~2b", wantErr: builtin.ErrInvalidPointer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := builtin.StripFunc(builtin.Strip{Paths: []string{"/status", tt.path}})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if want := `"` + tt.path + `"`; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name the pointer %s", err, want)
			}
		})
	}
}

func TestParsePointer(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "the empty pointer is the whole document", in: "", want: []string{}},
		{name: "a single slash is the empty key", in: "/", want: []string{""}},
		{name: "plain tokens are split on slashes", in: "/spec/containers/0", want: []string{"spec", "containers", "0"}},
		{name: "~1 is a slash and ~0 a tilde", in: "/a~1b/c~0d", want: []string{"a/b", "c~d"}},
		{name: "~01 unescapes to ~1, not to a slash", in: "/~01", want: []string{"~1"}},
		{name: "a pointer must start with a slash", in: "status", wantErr: `invalid JSON Pointer "status": must be empty or start with "/"`},
		{name: "a tilde at the end is an error", in: "/a~", wantErr: `invalid JSON Pointer "/a~": step 1 "a~": "~" must be followed by 0 or 1`},
		{name: "a tilde before another character is an error", in: "/a~2b", wantErr: `invalid JSON Pointer "/a~2b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := builtin.ParsePointer(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, builtin.ErrInvalidPointer) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePointer: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tokens = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFiltered(t *testing.T) {
	mark := func(_ context.Context, obj client.Object) (client.Object, error) {
		obj.SetAnnotations(map[string]string{"hooked": "true"})
		return obj, nil
	}
	tests := []struct {
		name      string
		filter    builtin.Filter
		obj       client.Object
		wantHooks bool
	}{
		{name: "an empty filter runs the hook", obj: newPod(), wantHooks: true},
		{
			name:      "an object in a listed namespace runs the hook",
			filter:    builtin.Filter{Namespaces: []string{"team-b", "team-a"}},
			obj:       newPod(),
			wantHooks: true,
		},
		{
			name:   "an object in another namespace passes through",
			filter: builtin.Filter{Namespaces: []string{"team-b"}},
			obj:    newPod(),
		},
		{
			name:   "a cluster-scoped object never matches a namespace list",
			filter: builtin.Filter{Namespaces: []string{"team-a"}},
			obj:    &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
		},
		{
			name:      "matching labels run the hook",
			filter:    builtin.Filter{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			obj:       newPod(),
			wantHooks: true,
		},
		{
			name:   "labels that do not match pass through",
			filter: builtin.Filter{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
			obj:    newPod(),
		},
		{
			name: "a match expression is honoured on an unstructured object",
			filter: builtin.Filter{ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"w", "x"}},
			}}},
			obj:       newWidget(),
			wantHooks: true,
		},
		{
			name:      "an empty selector matches every object",
			filter:    builtin.Filter{ObjectSelector: &metav1.LabelSelector{}},
			obj:       &corev1.Pod{},
			wantHooks: true,
		},
		{
			name: "namespace and selector must both match",
			filter: builtin.Filter{
				Namespaces:     []string{"team-b"},
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			},
			obj: newPod(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := builtin.Filtered(tt.filter, mark)
			if err != nil {
				t.Fatalf("Filtered: %v", err)
			}
			before := tt.obj.GetAnnotations()
			out, err := fn(t.Context(), tt.obj)
			if err != nil {
				t.Fatalf("hook: %v", err)
			}
			hooked := out.GetAnnotations()["hooked"] == "true"
			if hooked != tt.wantHooks {
				t.Errorf("hook ran = %v, want %v", hooked, tt.wantHooks)
			}
			if !tt.wantHooks && !reflect.DeepEqual(out.GetAnnotations(), before) {
				t.Errorf("object changed although it did not match")
			}
		})
	}
}

func TestFilteredRejectsInvalidSelector(t *testing.T) {
	_, err := builtin.Filtered(builtin.Filter{ObjectSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Inn", Values: []string{"x"}}},
	}}, builtin.LabelsFunc(builtin.Labels{}))
	if err == nil || !strings.Contains(err.Error(), "Inn") {
		t.Errorf("error = %v, want one naming the operator Inn", err)
	}
}

func TestNewRegistersAndRuns(t *testing.T) {
	strip, err := builtin.StripFunc(builtin.Strip{Paths: []string{"/status/hostIP"}})
	if err != nil {
		t.Fatal(err)
	}
	widget := &unstructured.Unstructured{}
	widgetGVK := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	widget.SetGroupVersionKind(widgetGVK)
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")

	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		hooks.NewFunc("pod-labels", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical, hooks.CreatePhysical},
			builtin.LabelsFunc(builtin.Labels{Labels: map[string]string{"team": "a"}})),
		hooks.NewFunc("pod-strip", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, strip),
		hooks.NewFunc("widget-strip", widget, []hooks.HookType{hooks.GetPhysical}, strip),
	)

	podJSON, err := json.Marshal(newPod())
	if err != nil {
		t.Fatal(err)
	}
	widgetJSON, err := json.Marshal(newWidget().Object)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		gvk  schema.GroupVersionKind
		typ  hooks.HookType
		raw  []byte
		want func(t *testing.T, obj map[string]any)
	}{
		{
			name: "labels on a typed Pod give a patch that adds the label",
			gvk:  podGVK, typ: hooks.UpdatePhysical, raw: podJSON,
			want: func(t *testing.T, obj map[string]any) {
				labels := obj["metadata"].(map[string]any)["labels"].(map[string]any)
				if labels["team"] != "a" || labels["app"] != "web" {
					t.Errorf("labels = %v, want team=a added to app=web", labels)
				}
			},
		},
		{
			name: "strip on a typed Pod gives a patch that removes the status field",
			gvk:  podGVK, typ: hooks.GetPhysical, raw: podJSON,
			want: func(t *testing.T, obj map[string]any) {
				if _, ok := obj["status"].(map[string]any)["hostIP"]; ok {
					t.Errorf("status.hostIP still there: %v", obj["status"])
				}
			},
		},
		{
			name: "strip on an unstructured custom resource gives a patch that removes the field",
			gvk:  widgetGVK, typ: hooks.GetPhysical, raw: widgetJSON,
			want: func(t *testing.T, obj map[string]any) {
				status := obj["status"].(map[string]any)
				if _, ok := status["hostIP"]; ok || status["phase"] != "Ready" {
					t.Errorf("status = %v, want hostIP gone and phase kept", status)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := reg.Mutate(t.Context(), tt.gvk, tt.typ, tt.raw)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Patch == nil {
				t.Fatal("Run gave no patch")
			}
			patched, err := patch.Apply(tt.raw, res.Patch)
			if err != nil {
				t.Fatalf("apply %s: %v", res.Patch, err)
			}
			var obj map[string]any
			if err := json.Unmarshal(patched, &obj); err != nil {
				t.Fatal(err)
			}
			tt.want(t, obj)
		})
	}
}
