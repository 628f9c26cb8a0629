// Package bridgev2 serves an engine.Registry to real vcluster as a plugin v2: the protocol of the
// vcluster chart's current plugins: values key (vcluster >= 0.20), in which the syncer starts
// the plugin binary itself with hashicorp/go-plugin and calls it over one kept gRPC connection.
// The v1 sidecar protocol (legacy plugin: key) is package bridge.
//
// How vcluster runs a v2 plugin (vcluster v0.36.x, pkg/plugin/v2):
//
//   - it starts /plugins/<name>/plugin with no arguments, with the syncer container's
//     environment plus VCLUSTER_PLUGIN=vcluster (go-plugin's magic cookie, Handshake) and the
//     values' plugins.<name>.config as YAML in PLUGIN_CONFIG (ConfigEnvVar; when it is empty, a
//     SYNCHOOK_CONFIG in the syncer's environment applies, else the built-in default);
//   - it reads go-plugin's handshake line from the plugin's stdout, so nothing else may be
//     written to stdout (log to stderr);
//   - it calls pluginv2.Plugin: Initialize (vcluster waits for it), GetPluginConfig (the client
//     hooks, JSON), SetLeader, and Mutate for each (apiVersion, kind, type) registered, one
//     object at a time (a List is sent item by item), with a 10 s deadline each.
//
// Mutate runs the same chain as POST /mutate/{hookType} and the v1 bridge (bridge.Mutator):
// mutated=false when nothing changed, there are no hooks or the type is not one of the eight
// (ApplyPhysical); else the whole object, encoded so that vcluster's json.Unmarshal INTO the
// object it sent yields exactly the hooked object (engine.Result.Answer); a hook failure is a gRPC
// error naming the hook (bridge.StatusCode), and vcluster then does not write.
//
// Initialize carries the host kubeconfig and namespace (workloadConfig, currentNamespace): with
// Options.Keys, the Server reads or creates the undo key Secret there (internal/undokey, at
// most Options.KeyTimeout, never holding vcluster's start: an unreachable host means no key,
// one log line, OnKeyFallback, and retries in the background), and announces in
// GetPluginConfig the read types of the kinds an earlier process sealed undos on.
//
// Serve does not start the HTTPS admission endpoint or a metrics listener; a v2 plugin lives
// inside the syncer container and has no ports of its own. Hence no health probe either: when
// hooks that ignore their context hold every concurrency slot longer than
// Options.StuckSlotsFactor × RequestTimeout, the Server logs one error naming them (and one
// line when a slot is free again), checked on calls refused as overloaded.
package bridgev2
