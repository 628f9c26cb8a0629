// Package hooks is the SDK for hook authors: a hook is a ClientHook (Name and Resource) with any
// of the eight MutateXxx methods of the vcluster SDK (an existing vcluster-sdk hook ports by
// changing its import), or a function made into one by NewFunc, Typed or NewMetadataFunc.
// Register hooks with package plugin; synchook's engine (internal/engine) runs them.
package hooks
