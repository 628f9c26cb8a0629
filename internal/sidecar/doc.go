// Package sidecar wires the pieces of a synchook program together. BuildRegistry turns the
// config (file, SYNCHOOK_CONFIG or the built-in default) and the program's Go hooks into the
// chain registry, the same way for serve, the plugin v2 mode, mutate and replay; Serve runs
// `synchook serve` (certificates, the webhook.Server admission endpoint, probes, metrics,
// optional capture and, when a plugin address is set, the vcluster plugin v1 bridge on the same
// registry); ServePluginV2 runs the program as a vcluster plugin v2 (package bridgev2); Mutate
// is the offline dry run behind `synchook mutate`.
//
// It holds no hook logic and no protocol code of its own; package plugin parses the flags and
// the environment into Options and calls it.
package sidecar
