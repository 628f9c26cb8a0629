// Command echoplugin is a vcluster plugin v2 that answers every Mutate with the request's
// object, unchanged and unparsed, with mutated=true: the cost of vcluster's plugin round trip
// (gRPC over the go-plugin connection, the manager's JSON encode and decode) with no plugin
// work at all. It is the floor of BenchmarkV2MutatePod and TestVClusterSyncerThroughput.
//
// It registers CreatePhysical for v1 Pods, or the client hooks in PLUGIN_CONFIG (set by
// vcluster from plugins.<name>.config), in vcluster's PluginConfig form:
//
//	clientHooks:
//	  - {apiVersion: v1, kind: Pod, types: [CreatePhysical, UpdatePhysical, GetPhysical]}
package main

import (
	"context"
	"fmt"
	"os"

	v2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	"github.com/loft-sh/vcluster/pkg/plugin/v2/pluginv2"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/e2e/vcluster/internal/refplugin"
)

type config struct {
	ClientHooks []*v2.ClientHook `json:"clientHooks"`
}

func main() {
	cfg := config{ClientHooks: []*v2.ClientHook{{APIVersion: "v1", Kind: "Pod", Types: []string{"CreatePhysical"}}}}
	if raw := os.Getenv(v2.PluginConfigEnv); raw != "" {
		if err := yaml.UnmarshalStrict([]byte(raw), &cfg); err != nil {
			fmt.Fprintf(os.Stderr, "echoplugin: %s: %v\n", v2.PluginConfigEnv, err)
			os.Exit(2)
		}
	}
	refplugin.Serve(&refplugin.Server{
		ClientHooks: cfg.ClientHooks,
		Handle: func(_ context.Context, req *pluginv2.Mutate_Request) (string, bool, error) {
			return req.GetObject(), true, nil
		},
	})
}
