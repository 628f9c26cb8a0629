package plugin

import "github.com/synchook/synchook/hooks"

// The hook interfaces under the names vcluster-sdk's plugin package gives them, so that a
// vcluster-sdk hook (var _ plugin.MutateCreatePhysical = &podHook{}, func NewPodHook()
// plugin.ClientHook) ports by changing its import path. They are the types of package hooks.
type (
	// ClientHook is hooks.ClientHook: Name and Resource, plus any of the eight Mutate methods.
	ClientHook = hooks.ClientHook
	// MutateCreatePhysical is hooks.MutateCreatePhysical.
	MutateCreatePhysical = hooks.MutateCreatePhysical
	// MutateUpdatePhysical is hooks.MutateUpdatePhysical.
	MutateUpdatePhysical = hooks.MutateUpdatePhysical
	// MutateDeletePhysical is hooks.MutateDeletePhysical.
	MutateDeletePhysical = hooks.MutateDeletePhysical
	// MutateGetPhysical is hooks.MutateGetPhysical.
	MutateGetPhysical = hooks.MutateGetPhysical
	// MutateCreateVirtual is hooks.MutateCreateVirtual.
	MutateCreateVirtual = hooks.MutateCreateVirtual
	// MutateUpdateVirtual is hooks.MutateUpdateVirtual.
	MutateUpdateVirtual = hooks.MutateUpdateVirtual
	// MutateDeleteVirtual is hooks.MutateDeleteVirtual.
	MutateDeleteVirtual = hooks.MutateDeleteVirtual
	// MutateGetVirtual is hooks.MutateGetVirtual.
	MutateGetVirtual = hooks.MutateGetVirtual
)
