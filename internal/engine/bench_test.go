package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
)

type benchObject struct {
	name string
	gvk  schema.GroupVersionKind
	raw  []byte
	new  func() client.Object
}

func benchObjects() []benchObject {
	return []benchObject{
		{"pod", corev1.SchemeGroupVersion.WithKind("Pod"), fixtures.JSON(fixtures.Pod("ns", "web")), func() client.Object { return &corev1.Pod{} }},
		{"service", corev1.SchemeGroupVersion.WithKind("Service"), fixtures.JSON(fixtures.Service("ns", "web")), func() client.Object { return &corev1.Service{} }},
		{"secret", corev1.SchemeGroupVersion.WithKind("Secret"), fixtures.JSON(fixtures.Secret("ns", "web", "hunter2")), func() client.Object { return &corev1.Secret{} }},
	}
}

// labelFunc sets one label; hook i of n uses its own key so every hook changes something.
func labelFunc(key string) hooks.MutateFunc {
	return func(_ context.Context, o client.Object) (client.Object, error) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[key] = "true"
		o.SetLabels(l)
		return o, nil
	}
}

// BenchmarkFloorDecodeEncode is floor (a): the typed JSON decode + encode of the same object
// with the same libraries the chain uses.
func BenchmarkFloorDecodeEncode(b *testing.B) {
	for _, o := range benchObjects() {
		b.Run(o.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(o.raw)))
			for b.Loop() {
				obj := o.new()
				if err := kjson.UnmarshalCaseSensitivePreserveInts(o.raw, obj); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChain runs Registry.Mutate (decode → hooks → encode → patch) with 0, 1 and 3 label
// hooks. hooks=0 is a (GVK, type) without hooks: the fast path.
func BenchmarkChain(b *testing.B) {
	for _, o := range benchObjects() {
		for _, n := range []int{0, 1, 3} {
			b.Run(fmt.Sprintf("%s/hooks=%d", o.name, n), func(b *testing.B) {
				reg := engine.NewRegistry(nil)
				for i := range n {
					reg.MustRegister(funcHook{name: fmt.Sprintf("h%d", i), obj: o.new(), fns: map[hooks.HookType]hooks.MutateFunc{
						hooks.CreatePhysical: labelFunc(fmt.Sprintf("synchook.io/hook-%d", i)),
					}})
				}
				ctx, cancel := context.WithCancel(b.Context())
				defer cancel()
				b.ReportAllocs()
				b.SetBytes(int64(len(o.raw)))
				for b.Loop() {
					res, err := reg.Mutate(ctx, o.gvk, hooks.CreatePhysical, o.raw)
					if err != nil {
						b.Fatal(err)
					}
					if (res.Patch == nil) != (n == 0) {
						b.Fatalf("patch %s with %d hooks", res.Patch, n)
					}
				}
			})
		}
	}
}
