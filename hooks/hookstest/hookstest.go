// Package hookstest runs a Go hook in a unit test the way a synchook program runs it: the
// object goes through synchook's engine as JSON, in a registry of the hook's own with automatic
// undo on, so the test sees what the syncer would see — the guard (a change to apiVersion,
// kind, name, namespace or uid, or an object of another kind, fails the call), the
// label/annotation fast path of a hooks.MetadataHook, the withheld messages of hooks on
// Secrets, the synchook.io/undo annotation a write records and the undo a read applies.
//
//	func TestPodHook(t *testing.T) {
//		out, patch, err := hookstest.Run(t, NewPodHook(), hooks.CreatePhysical, pod)
//		…
//		hookstest.RoundTrip(t, NewPodHook(), hooks.CreatePhysical, pod) // the read gives pod back
//	}
package hookstest

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
	"github.com/synchook/synchook/webhook"
)

// testRing is the undo key ring of every Run in this process, so that a read opens what a
// write sealed, as with the key a deployed synchook holds.
var testRing = sync.OnceValue(func() *undo.Ring {
	ring, err := undo.GenerateRing()
	if err != nil {
		panic(err)
	}
	return ring
})

// Run runs hook on obj for the hook type typ as a synchook program does and returns the
// resulting object (a new T; obj is not changed), the RFC 6902 JSON Patch from obj to it (nil
// when nothing changed) and the error of the call. A write (Create*, Update*) leaves the
// synchook.io/undo annotation on the result, as on the host object; a read (Get*) of such a
// result applies it. hook's context ends after webhook.DefaultRequestTimeout (10 s) or with
// the test.
//
// The error wraps the hook's own error (errors.Is and errors.As find it), except on a Secret,
// whose hooks' messages synchook withholds; it names the hook, its type and kind. A hook that
// implements no method for typ leaves obj as it is. Run fails the test (t.Fatal) when hook
// cannot be registered (empty name, a resource the scheme does not know, no hook type) or obj
// cannot be encoded, and reports (t.Error) a hook that changes its own result again, with
// which a synchook program refuses to start.
func Run[T client.Object](t testing.TB, hook hooks.ClientHook, typ hooks.HookType, obj T) (T, []byte, error) {
	t.Helper()
	var zero T
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(testRing())})
	if err := reg.Register(hook); err != nil {
		t.Fatalf("hookstest: %v", err)
	}
	raw, gvk := encode(t, reg, obj)
	ctx, cancel := context.WithTimeout(t.Context(), webhook.DefaultRequestTimeout)
	defer cancel()
	err := reg.CheckIdempotent(ctx, func(g schema.GroupVersionKind) [][]byte {
		if g == gvk {
			return [][]byte{raw}
		}
		return nil
	})
	if err != nil {
		t.Errorf("hookstest: %v", err)
	}
	res, err := engine.NewRunner(reg, engine.RunnerOptions{}).Mutate(ctx, gvk, typ, raw)
	if err != nil {
		return zero, nil, err
	}
	hooked, err := res.Object()
	if err != nil {
		t.Fatalf("hookstest: apply the chain's patch %s: %v", res.Patch, err)
	}
	out, ok := reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
	if !ok {
		t.Fatalf("hookstest: %T is no pointer to an object", obj)
	}
	if err := json.Unmarshal(hooked, out); err != nil {
		t.Fatalf("hookstest: decode the hooked object into %T: %v", out, err)
	}
	// What the test gave: a typed object usually has no apiVersion and kind set.
	out.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return out, res.Patch, nil
}

// RoundTrip runs hook on obj for the write hook type write (CreatePhysical, UpdatePhysical,
// CreateVirtual or UpdateVirtual), then the read of the same side (GetPhysical or GetVirtual)
// on the result, as the syncer reads back what it wrote, and reports (t.Error) every field
// where the read does not give obj back, as a JSON Patch. It returns the written object.
// It fails the test (t.Fatal) for another hook type, when either call fails, and as Run does.
func RoundTrip[T client.Object](t testing.TB, hook hooks.ClientHook, write hooks.HookType, obj T) T {
	t.Helper()
	read, ok := write.ReadOf()
	if !ok {
		t.Fatalf("hookstest.RoundTrip: %s is no write hook type (CreatePhysical, UpdatePhysical, CreateVirtual, UpdateVirtual)", write)
	}
	written, _, err := Run(t, hook, write, obj)
	if err != nil {
		t.Fatalf("hookstest.RoundTrip: %s: %v", write, err)
	}
	back, _, err := Run(t, hook, read, written)
	if err != nil {
		t.Fatalf("hookstest.RoundTrip: %s of the %s result: %v", read, write, err)
	}
	reg := engine.NewRegistry(nil)
	want, _ := encode(t, reg, obj)
	got, _ := encode(t, reg, back)
	ops, err := patch.Diff(want, got)
	if err != nil {
		t.Fatalf("hookstest.RoundTrip: compare: %v", err)
	}
	if len(ops) > 0 {
		diff, _ := patch.Marshal(ops)
		t.Errorf("hookstest.RoundTrip: %s then %s does not give the object back; from the object to what the syncer reads: %s", write, read, diff)
	}
	return written
}

// encode returns obj as the JSON a syncer sends, apiVersion and kind set, and its GVK (for a
// typed object, the scheme's).
func encode(t testing.TB, reg *engine.Registry, obj client.Object) ([]byte, schema.GroupVersionKind) {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, reg.Scheme())
	if err != nil {
		t.Fatalf("hookstest: the kind of %T: %v", obj, err)
	}
	cp, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		t.Fatalf("hookstest: a copy of %T is no client.Object", obj)
	}
	cp.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(cp)
	if err != nil {
		t.Fatalf("hookstest: encode %T: %v", obj, err)
	}
	return raw, gvk
}
