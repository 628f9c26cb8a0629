// Command sdkplugin is a vcluster plugin v2 that does per call what a plugin written with
// vcluster-sdk does: decode the request's JSON into a typed *corev1.Pod with encoding/json, run
// a Go hook on it, encode the whole object again and answer mutated=true only when the encoding
// changed. Its hook sets the label vcluster.example.com/tenant: team-a on the write types it
// registers (default CreatePhysical) and, with hideOnGet, also registers GetPhysical and takes
// the label off there, so that vcluster's metadata merge never copies it into the tenant's pod.
// It is the "sdk-style" reference of BenchmarkV2MutatePod and TestVClusterSyncerThroughput.
//
// Taking a label off needs one step more than vcluster-sdk does: vcluster json.Unmarshals the
// answer INTO the object it sent, where a key missing from "labels" stays. So when the hook
// removed a label the answer's metadata starts with "labels":null (decoded first, it resets the
// map; the encoded labels that follow fill a new one), what a plugin author must add by hand
// for the hide to work at all (without it TestVClusterSyncerThroughput counts the label in
// about half of the virtual pods).
//
// PLUGIN_CONFIG (set by vcluster from plugins.<name>.config) may override the defaults:
//
//	labelKey: example.com/other
//	labelValue: x
//	types: [CreatePhysical, UpdatePhysical]   # the write types that set the label
//	hideOnGet: true                           # register GetPhysical, which removes it
//	nodePool: tenants                         # instead of the label, set spec.nodeSelector's
//	                                          # pool to this (a typed spec change; no hideOnGet)
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	v2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	"github.com/loft-sh/vcluster/pkg/plugin/v2/pluginv2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/e2e/vcluster/internal/refplugin"
)

const getPhysical = "GetPhysical"

type config struct {
	LabelKey   string   `json:"labelKey"`
	LabelValue string   `json:"labelValue"`
	Types      []string `json:"types"`
	HideOnGet  bool     `json:"hideOnGet"`
	NodePool   string   `json:"nodePool"`
}

func main() {
	cfg := config{LabelKey: "vcluster.example.com/tenant", LabelValue: "team-a", Types: []string{"CreatePhysical"}}
	if raw := os.Getenv(v2.PluginConfigEnv); raw != "" {
		if err := yaml.UnmarshalStrict([]byte(raw), &cfg); err != nil {
			fmt.Fprintf(os.Stderr, "sdkplugin: %s: %v\n", v2.PluginConfigEnv, err)
			os.Exit(2)
		}
	}
	if slices.Contains(cfg.Types, getPhysical) {
		fmt.Fprintf(os.Stderr, "sdkplugin: %s: types are the write types; hideOnGet registers %s\n", v2.PluginConfigEnv, getPhysical)
		os.Exit(2)
	}
	types := slices.Clone(cfg.Types)
	if cfg.HideOnGet {
		types = append(types, getPhysical)
	}
	// hook is the plugin's Go hook, as an sdk author writes it: label on the way down, no
	// label on the way up.
	hook := func(pod *corev1.Pod, hookType string) {
		if cfg.NodePool != "" { // the typed variant: a spec change
			if pod.Spec.NodeSelector == nil {
				pod.Spec.NodeSelector = map[string]string{}
			}
			pod.Spec.NodeSelector["pool"] = cfg.NodePool
			return
		}
		if hookType == getPhysical {
			delete(pod.Labels, cfg.LabelKey)
			return
		}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[cfg.LabelKey] = cfg.LabelValue
	}

	refplugin.Serve(&refplugin.Server{
		ClientHooks: []*v2.ClientHook{{APIVersion: "v1", Kind: "Pod", Types: types}},
		Handle: func(_ context.Context, req *pluginv2.Mutate_Request) (string, bool, error) {
			pod := &corev1.Pod{}
			if err := json.Unmarshal([]byte(req.GetObject()), pod); err != nil {
				return "", false, status.Errorf(codes.InvalidArgument, "decode %s %s: %v", req.GetApiVersion(), req.GetKind(), err)
			}
			before := len(pod.Labels)
			hook(pod, req.GetType())
			encoded, err := json.Marshal(pod)
			if err != nil {
				return "", false, status.Errorf(codes.Internal, "encode %s %s: %v", req.GetApiVersion(), req.GetKind(), err)
			}
			if len(pod.Labels) < before {
				encoded = bytes.Replace(encoded, []byte(`"metadata":{`), []byte(`"metadata":{"labels":null,`), 1)
			}
			if bytes.Equal(encoded, []byte(req.GetObject())) {
				return req.GetObject(), false, nil
			}
			return string(encoded), true, nil
		},
	})
}
