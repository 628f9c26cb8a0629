// Package hooks is the SDK for hook authors: a hook is a ClientHook (Name and Resource) with any
// of the eight MutateXxx methods of the vcluster SDK (an existing vcluster-sdk hook ports by
// changing its import), or a function made into one by NewFunc, Typed or NewMetadataFunc.
// Register hooks with package plugin; synchook's engine (internal/engine) runs them.
//
// An Update* hook finds the object the update replaces with OldObject and DecodeOldObject when
// the transport sent one (an admission UPDATE; never under vcluster).
package hooks
