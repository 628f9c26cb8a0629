package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
)

// errCounter is a context whose Err is nil for its first n calls and DeadlineExceeded from
// then on (n < 0: never), counting the calls: a deadline that passes in the middle of a chain,
// without a clock.
type errCounter struct {
	context.Context
	n     int64
	calls atomic.Int64
}

func (c *errCounter) Err() error {
	if k := c.calls.Add(1); c.n >= 0 && k > c.n {
		return context.DeadlineExceeded
	}
	return nil
}

// A wildcard strip of a field in each of 40,000 tolerations (and, on the document path, of
// every toleration: one removal each) strips them all on each of the strip's three paths, and
// looks at the request's context inside the wildcard: once more every few hundred elements
// than the same request with one toleration does. A deadline that passes there ends the
// request with a deadline error (issue 42), where without those step boundaries the strip ran
// to its end.
func TestAWildcardStripLooksAtTheRequestsContextPerFewHundredElements(t *testing.T) {
	const n = 40000
	pod := corev1.SchemeGroupVersion.WithKind("Pod")
	for _, tt := range []struct {
		path      string
		gvk       schema.GroupVersionKind
		stripOnly bool
		shape     int // of wildcardShapes
	}{
		{"typed", pod, false, 1},
		{"unstructured", widgetGVK, false, 1},
		{"document", pod, true, 1},
		{"document", pod, true, 0},
	} {
		shape := wildcardShapes[tt.shape]
		t.Run(fmt.Sprintf("%s/%s", tt.path, shape.name), func(t *testing.T) {
			reg := wildcardRegistry(t, tt.gvk, shape.path, tt.stripOnly)
			mutate := func(ctx context.Context, count int) ([]byte, error) {
				res, err := reg.Mutate(ctx, tt.gvk, hooks.CreatePhysical, tolerationsObject(tt.gvk, count, shape.element))
				if err != nil {
					return nil, err
				}
				answer, err := res.Object()
				if err != nil {
					t.Fatal(err)
				}
				wildcardStripped(t, answer, shape.name, count)
				return answer, nil
			}
			small := &errCounter{Context: context.Background(), n: -1}
			if _, err := mutate(small, 1); err != nil {
				t.Fatal(err)
			}
			big := &errCounter{Context: context.Background(), n: -1}
			if _, err := mutate(big, n); err != nil {
				t.Fatal(err)
			}
			if more := big.calls.Load() - small.calls.Load(); more < n/1000 {
				t.Fatalf("%d tolerations: %d looks at the context more than with one, want at least one per 1,000 elements", n, more)
			}
			// done once the small request's looks are over: in the big one's strip
			ctx := &errCounter{Context: context.Background(), n: small.calls.Load()}
			_, err := mutate(ctx, n)
			if kind, _ := failure.Classify(err); kind != failure.Deadline {
				t.Fatalf("a deadline that passes inside the wildcard: error %v (%v), want a deadline error", err, kind)
			}
			if calls := ctx.calls.Load(); calls != small.calls.Load()+1 {
				t.Fatalf("the request looked at its context %d times after it found it done, want it to stop at once", calls-small.calls.Load()-1)
			}
		})
	}
}
