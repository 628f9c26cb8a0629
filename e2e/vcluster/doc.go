// Package vcluster holds end-to-end tests that load synchook through
// vcluster's own plugin v2 manager (github.com/loft-sh/vcluster/pkg/plugin/v2),
// exactly the way a vcluster syncer does, and benchmark it against reference
// plugins written in the vcluster-sdk style.
//
// This is a separate module on purpose: vcluster's dependency graph clashes
// with synchook's, so the module never imports github.com/synchook/synchook;
// it builds the synchook binary with `go build` and loads it as a plugin.
package vcluster
