// Package hooks is the SDK for hook authors and the engine that runs their hooks.
//
// A hook is a ClientHook (Name and Resource) that implements any of the eight optional
// interfaces MutateCreatePhysical … MutateGetVirtual. The method signatures are those of the
// vcluster SDK (github.com/loft-sh/vcluster-sdk/plugin), so an existing vcluster hook ports by
// changing its import.
//
// A Registry holds hooks keyed by (GVK, HookType) in registration order: the hook chain. Chain
// runs one chain on the JSON of one object and returns the RFC 6902 JSON Patch that turns the
// request object into the hooked object (see Registry.Mutate; servers run requests through a Runner, which adds limits, per-hook deadlines and an Observer).
//
// This package does not speak any transport: the webhook package serves it as AdmissionReviews,
// the bridge package as vcluster plugin v1 gRPC, and a Go syncer can call Runner.Mutate directly.
package hooks
