package hooks

import (
	"context"
	"fmt"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Typed returns a hook named name that runs mutate on the objects of type T (a pointer to a
// Kubernetes API type the scheme knows, such as *corev1.Pod) for every hook type in types:
// mutate changes the object in place, and returning an error fails the call as a Mutate
// method's error does. T is inferred from mutate, so no hook asserts obj.(*corev1.Pod):
//
//	hooks.Typed("tenant-label", []hooks.HookType{hooks.CreatePhysical},
//		func(_ context.Context, pod *corev1.Pod) error { … })
//
// Its Resource is a new, empty T. Register fails for a T the scheme does not know and for
// *unstructured.Unstructured, which has no kind of its own (use NewFunc with apiVersion and
// kind set); should an object of another type ever reach it, the call fails naming both types.
func Typed[T client.Object](name string, types []HookType, mutate func(ctx context.Context, obj T) error) FuncHook {
	return TypedFunc(name, types, func(ctx context.Context, obj T) (T, error) {
		return obj, mutate(ctx, obj)
	})
}

// TypedFunc is Typed for a mutate that returns the object to pass on: the one it was given,
// changed in place, or a new object of the same type.
func TypedFunc[T client.Object](name string, types []HookType, mutate func(ctx context.Context, obj T) (T, error)) FuncHook {
	return NewFunc(name, newTyped[T](), types, func(ctx context.Context, obj client.Object) (client.Object, error) {
		typed, ok := obj.(T)
		if !ok {
			return nil, fmt.Errorf("hook %q: object %T is not %s", name, obj, reflect.TypeFor[T]())
		}
		return mutate(ctx, typed)
	})
}

// newTyped returns a new, empty T when T is a pointer to a struct, else nil (no Resource:
// Register says so).
func newTyped[T client.Object]() client.Object {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	return reflect.New(t.Elem()).Interface().(client.Object)
}
