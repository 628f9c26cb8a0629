// Command vcluster-sdk-hooks is vcluster-sdk's "hooks" example ported to synchook: the hook
// files keep vcluster-sdk's shape (NewPodHook() plugin.ClientHook, var _ plugin.MutateXxx
// checks) and only their import path changed, from github.com/loft-sh/vcluster-sdk/plugin to
// github.com/synchook/synchook/plugin. main is the same three calls.
package main

import (
	"github.com/synchook/synchook/examples/vcluster-sdk-hooks/hooks"
	"github.com/synchook/synchook/plugin"
)

func main() {
	plugin.MustInit()
	plugin.MustRegister(hooks.NewPodHook())
	plugin.MustRegister(hooks.NewServiceHook())
	plugin.MustRegister(hooks.NewSecretHook())
	plugin.MustStart()
}
