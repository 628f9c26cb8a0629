package hooks

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// funcHook is the FuncHook returned by NewFunc.
type funcHook struct {
	name     string
	resource client.Object
	funcs    map[HookType]MutateFunc
}

// NewFunc returns a hook named name that runs mutate for every hook type in types on objects of
// the kind of resource (a typed object such as &corev1.Pod{}, or an *unstructured.Unstructured
// with apiVersion and kind set): a hook without a type of its own, for config-driven hooks,
// quick hooks in main.go and test fakes. Repeated types count once. Register checks the name,
// the resource and the types.
func NewFunc(name string, resource client.Object, types []HookType, mutate MutateFunc) FuncHook {
	funcs := make(map[HookType]MutateFunc, len(types))
	for _, t := range types {
		funcs[t] = mutate
	}
	return &funcHook{name: name, resource: resource, funcs: funcs}
}

// NewFuncs is NewFunc with a function of its own for each hook type (the keys of funcs).
func NewFuncs(name string, resource client.Object, funcs map[HookType]MutateFunc) FuncHook {
	return &funcHook{name: name, resource: resource, funcs: maps.Clone(funcs)}
}

// Name implements ClientHook.
func (h *funcHook) Name() string { return h.name }

// Resource implements ClientHook.
func (h *funcHook) Resource() client.Object { return h.resource }

// MutateFuncs implements FuncHook. It returns a copy, so callers cannot change the hook.
func (h *funcHook) MutateFuncs() map[HookType]MutateFunc { return maps.Clone(h.funcs) }
