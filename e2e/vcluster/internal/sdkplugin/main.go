// Command sdkplugin is a vcluster plugin v2 that does per call what a plugin written with
// vcluster-sdk does: decode the request's JSON into a typed *corev1.Pod with encoding/json, run
// a Go hook on it (set the label vcluster.example.com/tenant: team-a), encode the whole object
// again and answer mutated=true only when the encoding changed. GetPluginConfig registers
// CreatePhysical for v1 Pods. It is the "sdk-style" reference of BenchmarkV2MutatePod.
//
// PLUGIN_CONFIG (set by vcluster from plugins.<name>.config) may override the label:
//
//	labelKey: example.com/other
//	labelValue: x
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	v2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	"github.com/loft-sh/vcluster/pkg/plugin/v2/pluginv2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/e2e/vcluster/internal/refplugin"
)

type config struct {
	LabelKey   string `json:"labelKey"`
	LabelValue string `json:"labelValue"`
}

func main() {
	cfg := config{LabelKey: "vcluster.example.com/tenant", LabelValue: "team-a"}
	if raw := os.Getenv(v2.PluginConfigEnv); raw != "" {
		if err := yaml.UnmarshalStrict([]byte(raw), &cfg); err != nil {
			fmt.Fprintf(os.Stderr, "sdkplugin: %s: %v\n", v2.PluginConfigEnv, err)
			os.Exit(2)
		}
	}
	hook := func(pod *corev1.Pod) {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[cfg.LabelKey] = cfg.LabelValue
	}

	refplugin.Serve(&refplugin.Server{
		ClientHooks: []*v2.ClientHook{{APIVersion: "v1", Kind: "Pod", Types: []string{"CreatePhysical"}}},
		Handle: func(_ context.Context, req *pluginv2.Mutate_Request) (string, bool, error) {
			pod := &corev1.Pod{}
			if err := json.Unmarshal([]byte(req.GetObject()), pod); err != nil {
				return "", false, status.Errorf(codes.InvalidArgument, "decode %s %s: %v", req.GetApiVersion(), req.GetKind(), err)
			}
			hook(pod)
			encoded, err := json.Marshal(pod)
			if err != nil {
				return "", false, status.Errorf(codes.Internal, "encode %s %s: %v", req.GetApiVersion(), req.GetKind(), err)
			}
			if bytes.Equal(encoded, []byte(req.GetObject())) {
				return req.GetObject(), false, nil
			}
			return string(encoded), true, nil
		},
	})
}
