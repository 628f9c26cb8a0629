package engine

import (
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
)

// Capabilities describes what a Registry serves, as returned by GET /capabilities.
type Capabilities struct {
	// Resources lists one entry per GVK, in order of first registration.
	Resources []ResourceCapabilities `json:"resources"`
}

// ResourceCapabilities lists the hook types of one GVK and, for each, its hook names in chain
// order.
type ResourceCapabilities struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// HookTypes lists the hook types that have hooks, in canonical order.
	HookTypes []HookTypeCapabilities `json:"hookTypes"`
}

// HookTypeCapabilities names the hooks of one hook type, in chain order.
type HookTypeCapabilities struct {
	Type  hooks.HookType `json:"type"`
	Hooks []string       `json:"hooks"`
}

// Capabilities returns GVK → hook types → hook names for every registered hook.
func (r *Registry) Capabilities() Capabilities {
	caps := Capabilities{Resources: []ResourceCapabilities{}}
	for _, gvk := range r.gvks {
		apiVersion, kind := gvk.ToAPIVersionAndKind()
		rc := ResourceCapabilities{APIVersion: apiVersion, Kind: kind}
		for _, t := range hooks.AllHookTypes() {
			c := r.chains[Key{GVK: gvk, Type: t}]
			if c == nil {
				continue
			}
			names := make([]string, 0, len(c.hooks)+1)
			if c.undoRead {
				names = append(names, undo.Annotation)
			}
			for _, h := range c.hooks {
				names = append(names, h.name)
			}
			rc.HookTypes = append(rc.HookTypes, HookTypeCapabilities{Type: t, Hooks: names})
		}
		caps.Resources = append(caps.Resources, rc)
	}
	return caps
}
