package builtin_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
)

// doneAfter is a context whose Err is nil for its first n calls and DeadlineExceeded from then
// on (n < 0: never), counting the calls: a deadline that passes in the middle of a strip,
// without a clock.
type doneAfter struct {
	context.Context
	n     int64
	calls atomic.Int64
}

func (c *doneAfter) Err() error {
	if k := c.calls.Add(1); c.n >= 0 && k > c.n {
		return context.DeadlineExceeded
	}
	return nil
}

// tolerationsPod returns a Pod with n tolerations that each have tolerationSeconds.
func tolerationsPod(n int) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.APIVersion, pod.Kind, pod.Name, pod.Namespace = "v1", "Pod", "web", "ns"
	for range n {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](300)})
	}
	return pod
}

// kept counts the tolerations of obj (typed or unstructured) that still have tolerationSeconds.
func kept(t *testing.T, obj client.Object) int {
	t.Helper()
	pod, ok := obj.(*corev1.Pod)
	if u, isU := obj.(*unstructured.Unstructured); isU {
		pod = &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
			t.Fatal(err)
		}
	} else if !ok {
		t.Fatalf("%T", obj)
	}
	n := 0
	for _, tol := range pod.Spec.Tolerations {
		if tol.TolerationSeconds != nil {
			n++
		}
	}
	return n
}

// A wildcard strip looks at its context before each path and every few hundred elements, and
// stops where it finds it done with an error that wraps the context's and names the path,
// having left elements unvisited (issue 42: a deadline bounds it).
func TestAWildcardStripStopsAtAStepBoundary(t *testing.T) {
	const n = 40000
	path := "/spec/tolerations/*/tolerationSeconds"
	fn, err := builtin.StripFunc(builtin.Strip{Paths: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]func() client.Object{
		"typed": func() client.Object { return tolerationsPod(n) },
		"unstructured": func() client.Object {
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tolerationsPod(n))
			if err != nil {
				t.Fatal(err)
			}
			return &unstructured.Unstructured{Object: content}
		},
		// the typed path through the unstructured form: a wildcard below a value that encodes
		// itself (metav1.Time) comes after this one
		"typed, then through the unstructured form": func() client.Object { return tolerationsPod(n) },
	}
	for name, newObject := range objects {
		t.Run(name, func(t *testing.T) {
			fn := fn
			if strings.HasPrefix(name, "typed, then") {
				if fn, err = builtin.StripFunc(builtin.Strip{Paths: []string{"/metadata/creationTimestamp/x", path}}); err != nil {
					t.Fatal(err)
				}
			}
			never := &doneAfter{Context: context.Background(), n: -1}
			out, err := fn(never, newObject())
			if err != nil {
				t.Fatal(err)
			}
			if k := kept(t, out); k != 0 {
				t.Fatalf("%d tolerations keep tolerationSeconds, want none", k)
			}
			if calls := never.calls.Load(); calls < n/1000 {
				t.Fatalf("the strip of %d elements looked at its context %d times, want at least once every 1,000 elements", n, calls)
			}

			ctx := &doneAfter{Context: context.Background(), n: 3}
			obj := newObject()
			out, err = fn(ctx, obj)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), path) || out != nil {
				t.Fatalf("strip with a deadline passing at its 4th step boundary = %v, %v; want nil and an error that wraps context.DeadlineExceeded and names %s", out, err, path)
			}
			if calls := ctx.calls.Load(); calls != 4 {
				t.Fatalf("the strip looked at its context %d times after it found it done, want it to stop at once", calls-4)
			}
			if k := kept(t, obj); k == 0 || k == n && !strings.HasPrefix(name, "typed, then") {
				t.Fatalf("%d of %d tolerations keep tolerationSeconds: want the strip stopped in the middle", k, n)
			}
		})
	}
}

// A done context stops a strip before its first path, whatever the object.
func TestAStripWithADoneContextChangesNothing(t *testing.T) {
	fn, err := builtin.StripFunc(builtin.Strip{Paths: []string{"/spec/tolerations/*"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	pod := tolerationsPod(3)
	if out, err := fn(ctx, pod); !errors.Is(err, context.Canceled) || out != nil || len(pod.Spec.Tolerations) != 3 {
		t.Fatalf("strip = %v, %v, %d tolerations left; want an error wrapping context.Canceled and the pod untouched", out, err, len(pod.Spec.Tolerations))
	}
	want := fmt.Sprintf("strip %s: stopped at a step boundary: %v", "/spec/tolerations/*", context.Canceled)
	if _, err := fn(ctx, pod); err == nil || err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A wildcard strip of every element, or of a field in every element, allocates less than the
// object it strips, typed and unstructured (issue 42): it cuts a slice once, where rebuilding it
// per removed element allocates n²/2 elements (≈ 700 MB for these 4,000 tolerations).
func TestAWildcardStripAllocatesLessThanTheObject(t *testing.T) {
	const n = 4000
	for _, path := range []string{"/spec/tolerations/*", "/spec/tolerations/*/tolerationSeconds"} {
		fn, err := builtin.StripFunc(builtin.Strip{Paths: []string{path}})
		if err != nil {
			t.Fatal(err)
		}
		typed := tolerationsPod(n)
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tolerationsPod(n))
		if err != nil {
			t.Fatal(err)
		}
		limit := uint64(n * unsafe.Sizeof(corev1.Toleration{}))
		for name, obj := range map[string]client.Object{"typed": typed, "unstructured": &unstructured.Unstructured{Object: content}} {
			var out client.Object
			if bytes := allocated(func() { out, err = fn(t.Context(), obj) }); err != nil || bytes > limit {
				t.Errorf("%s %s: %d bytes allocated (limit %d, the tolerations' own size), %v", name, path, bytes, limit, err)
			}
			if k := kept(t, out); k != 0 {
				t.Errorf("%s %s: %d tolerations keep tolerationSeconds", name, path, k)
			}
		}
	}
}
