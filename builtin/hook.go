package builtin

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
)

// funcHook is the hooks.FuncHook returned by New.
type funcHook struct {
	name     string
	resource client.Object
	funcs    map[hooks.HookType]hooks.MutateFunc
}

// New returns a hook named name that runs mutate for every hook type in types on objects of
// the kind of resource (a typed object such as &corev1.Pod{}, or an
// *unstructured.Unstructured with apiVersion and kind set). Repeated types count once. The
// Registry checks the name, the resource and the types when the hook is registered.
func New(name string, resource client.Object, types []hooks.HookType, mutate hooks.MutateFunc) hooks.FuncHook {
	funcs := make(map[hooks.HookType]hooks.MutateFunc, len(types))
	for _, t := range types {
		funcs[t] = mutate
	}
	return &funcHook{name: name, resource: resource, funcs: funcs}
}

// Name implements hooks.ClientHook.
func (h *funcHook) Name() string { return h.name }

// Resource implements hooks.ClientHook.
func (h *funcHook) Resource() client.Object { return h.resource }

// MutateFuncs implements hooks.FuncHook. It returns a copy, so callers cannot change the hook.
func (h *funcHook) MutateFuncs() map[hooks.HookType]hooks.MutateFunc { return maps.Clone(h.funcs) }
