// Package sidecar wires the pieces of the synchook binary together: config → hooks.Registry →
// certificates → webhook.Server (and, when a plugin address is set, the vcluster plugin v1
// bridge.Bridge on the same registry), for `synchook serve`, and the offline dry run behind
// `synchook mutate`.
//
// It holds no hook logic and no protocol code of its own; main.go only parses flags into
// Options and calls Serve or Mutate.
package sidecar
