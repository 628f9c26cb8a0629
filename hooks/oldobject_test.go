package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
)

func TestOldObject(t *testing.T) {
	ctx := t.Context()
	if hooks.WithOldObject(ctx, nil) != ctx || hooks.WithOldObject(ctx, []byte{}) != ctx {
		t.Error("an empty old object changed the context")
	}
	if raw, ok := hooks.OldObject(ctx); ok || raw != nil {
		t.Errorf("OldObject without one = %q, %v", raw, ok)
	}
	if ok, err := hooks.DecodeOldObject(ctx, &corev1.Pod{}); ok || err != nil {
		t.Errorf("DecodeOldObject without one = %v, %v", ok, err)
	}

	const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"v":"1"}},"spec":{"priority":7}}`
	ctx = hooks.WithOldObject(ctx, []byte(pod))
	if raw, ok := hooks.OldObject(ctx); !ok || string(raw) != pod {
		t.Errorf("OldObject = %q, %v", raw, ok)
	}
	var typed corev1.Pod
	if ok, err := hooks.DecodeOldObject(ctx, &typed); !ok || err != nil || typed.Labels["v"] != "1" || *typed.Spec.Priority != 7 || typed.Kind != "Pod" {
		t.Errorf("typed: %v, %v, %+v", ok, err, typed)
	}

	// Unstructured keeps the kind it was given when the JSON has none; integers are int64.
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion("example.com/v1")
	widget.SetKind("Widget")
	ctx = hooks.WithOldObject(t.Context(), []byte(`{"metadata":{"name":"w"},"spec":{"size":3}}`))
	if ok, err := hooks.DecodeOldObject(ctx, widget); !ok || err != nil || widget.GetKind() != "Widget" ||
		widget.GetName() != "w" || widget.Object["spec"].(map[string]any)["size"] != int64(3) {
		t.Errorf("unstructured: %v, %v, %v", ok, err, widget.Object)
	}

	for _, bad := range []string{`null`, ` [1]`, `"x"`, `{"metadata":{"labels":{"v":1}}}`, `{"Metadata":{"name":"case-sensitive"}}`} {
		var p corev1.Pod
		ok, err := hooks.DecodeOldObject(hooks.WithOldObject(t.Context(), []byte(bad)), &p)
		if bad == `{"Metadata":{"name":"case-sensitive"}}` { // an unknown field, as the serializer reads it
			if !ok || err != nil || p.Name != "" {
				t.Errorf("%s: %v, %v, name %q", bad, ok, err, p.Name)
			}
			continue
		}
		if !ok || !errors.Is(err, hooks.ErrMalformedOldObject) {
			t.Errorf("%s: %v, %v; want ErrMalformedOldObject", bad, ok, err)
		}
	}
}

// An Update hook that compares the object with the old object, when the transport sent one
// (admission UPDATE); under vcluster there is none.
func ExampleDecodeOldObject() {
	mutate := func(ctx context.Context, obj client.Object) (client.Object, error) {
		old := &corev1.Pod{}
		ok, err := hooks.DecodeOldObject(ctx, old)
		if err != nil {
			return nil, err // malformed: the request is answered 400
		}
		if ok && old.Spec.Containers[0].Image != obj.(*corev1.Pod).Spec.Containers[0].Image {
			obj.SetAnnotations(map[string]string{"example.com/image-changed": "true"})
		}
		return obj, nil
	}
	pod := func(image string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}
	}
	ctx := hooks.WithOldObject(context.Background(), []byte(`{"spec":{"containers":[{"name":"c","image":"nginx:1.28"}]}}`))
	out, _ := mutate(ctx, pod("nginx:1.29"))
	fmt.Println(out.GetAnnotations())
	out, _ = mutate(context.Background(), pod("nginx:1.29"))
	fmt.Println(out.GetAnnotations())
	// Output:
	// map[example.com/image-changed:true]
	// map[]
}
