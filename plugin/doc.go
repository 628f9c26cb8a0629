// Package plugin is the entry point of a synchook program: the Go hooks of its author plus the
// full synchook CLI. A hook author's whole main is three calls, as with vcluster-sdk:
//
//	func main() {
//		plugin.MustInit()
//		plugin.MustRegister(&PodHook{})
//		plugin.MustStart()
//	}
//
// The program built this way is synchook with those hooks added after the config's hooks:
// `serve` (the HTTPS admission endpoint, metrics, probes and, with VCLUSTER_PLUGIN_ADDRESS, the
// vcluster plugin v1 bridge), `mutate` (offline dry run), `replay DIR` (run requests that serve
// --capture recorded through this build and config, and diff the results), `cleanup` (take
// synchook's undo and annotations off a stopped vcluster's host objects: docs/day2.md),
// `undo-key` (print a new undo key ring for --undo-key-file), `install DIR` (copy
// itself to DIR/plugin for vcluster's plugin v2 init container), `version` and `help`; and
// started by vcluster as a plugin v2 (no arguments, VCLUSTER_PLUGIN=vcluster), it serves
// vcluster's go-plugin protocol.
//
// A hook is a hooks.ClientHook: Name, Resource (a typed object such as &corev1.Pod{}) and any of
// MutateCreatePhysical, MutateUpdatePhysical, MutateDeletePhysical, MutateGetPhysical,
// MutateCreateVirtual, MutateUpdateVirtual, MutateDeleteVirtual, MutateGetVirtual with
// vcluster-sdk's signature, func(ctx, client.Object) (client.Object, error). Hooks are called
// concurrently (List items in parallel): keep them free of shared mutable state.
// hooks.Typed makes one from a func(ctx, *corev1.Pod) error; package hooks/hookstest runs one
// through synchook's engine in a unit test.
//
// Go hooks share their chain with the config's hooks (labels, strip, and policy:
// MutatingAdmissionPolicy in CEL), which run first, and everything the chain guarantees:
// automatic undo takes a write hook's change (Create*, Update*) off again on the paired Get
// type through the synchook.io/undo annotation, so a hook needs no Get method to give the
// syncer back what it wrote (a hook whose change the syncer should see opts out with an Undo
// method returning false, hooks.Undoer); with provenance on (serve --provenance, or provenance:
// true in the config) objects name the hooks that changed them in synchook.io/mutated-by.
//
// A hook's own settings live under the config's settings key, next to the config's hooks;
// UnmarshalConfig decodes them strictly into the author's type, to build the hooks from:
//
//	var s Settings
//	plugin.MustInit()
//	plugin.MustUnmarshalConfig(&s)
//	plugin.MustRegister(NewPodHook(s))
//	plugin.MustStart()
//
// A program with Go hooks runs no built-in default config: without --config, SYNCHOOK_CONFIG or
// PLUGIN_CONFIG only its Go hooks run. Every environment variable is read through
// Plugin.Getenv.
//
// The package-level functions use one default Plugin, like net/http's DefaultServeMux; New makes
// independent ones.
package plugin
