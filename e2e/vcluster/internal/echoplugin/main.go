// Command echoplugin is a vcluster plugin v2 that registers a CreatePhysical client hook for
// v1 Pods and answers every Mutate with the request's object, unchanged and unparsed, with
// mutated=true: the cost of vcluster's plugin round trip (gRPC over the go-plugin connection,
// the manager's JSON encode and decode) with no plugin work at all. It is the floor of
// BenchmarkV2MutatePod.
package main

import (
	"context"

	v2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	"github.com/loft-sh/vcluster/pkg/plugin/v2/pluginv2"

	"github.com/synchook/synchook/e2e/vcluster/internal/refplugin"
)

func main() {
	refplugin.Serve(&refplugin.Server{
		ClientHooks: []*v2.ClientHook{{APIVersion: "v1", Kind: "Pod", Types: []string{"CreatePhysical"}}},
		Handle: func(_ context.Context, req *pluginv2.Mutate_Request) (string, bool, error) {
			return req.GetObject(), true, nil
		},
	})
}
