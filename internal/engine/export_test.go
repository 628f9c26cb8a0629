package engine

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
)

// TakesAsOwnUndo reports whether the write chain (gvk, t) of reg takes the undo annotation on
// raw as one synchook wrote itself (applied, not recorded as the tenant's value).
func TakesAsOwnUndo(reg *Registry, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) bool {
	c := reg.chains[Key{GVK: gvk, Type: t}]
	if c == nil {
		return false
	}
	_, _, own := NewRunner(reg, RunnerOptions{}).newCall(false).ownUndo(c, raw)
	return own
}
