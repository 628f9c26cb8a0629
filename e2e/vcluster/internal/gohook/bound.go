package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/decode"
	"github.com/synchook/synchook/plugin"
)

// boundServer is one of TestV2Throughput's two bounds on the typed hook: synchook's v2 plugin
// server (bridgev2.ServePlugin, synchook's gRPC options and GOGC) whose Mutate decodes the Pod as
// synchook's typed path does (decode.Object) and sets spec.nodeSelector's pool, with none of
// synchook's own steps (the intake scan, the copy before the hook, the compare, the undo, the
// answer's splice). Then:
//
//   - field "bound" ("typed-bound"): it answers the request's object back, unchanged and
//     unencoded: not a correct plugin (the change is lost), the most any plugin on this shared
//     cost (vcluster's manager, gRPC, the decode) could reach;
//   - field "bound-encode" ("typed-encode"): it answers json.Marshal of the hooked Pod, as the
//     sdk-style plugin does: the least a correct typed plugin does with synchook's decode, the
//     copies both sides make (the decode, the encode of the answer) and nothing else.
type boundServer struct {
	pluginv2.UnimplementedPluginServer
	encode bool // answer the hooked Pod encoded ("bound-encode"), not the request back
}

func (boundServer) Initialize(context.Context, *pluginv2.Initialize_Request) (*pluginv2.Initialize_Response, error) {
	return &pluginv2.Initialize_Response{}, nil
}

func (boundServer) SetLeader(context.Context, *pluginv2.SetLeader_Request) (*pluginv2.SetLeader_Response, error) {
	return &pluginv2.SetLeader_Response{}, nil
}

func (boundServer) GetPluginConfig(context.Context, *pluginv2.GetPluginConfig_Request) (*pluginv2.GetPluginConfig_Response, error) {
	return &pluginv2.GetPluginConfig_Response{Config: `{"clientHooks":[{"apiVersion":"v1","kind":"Pod","types":["CreatePhysical"]}]}`}, nil
}

func (s boundServer) Mutate(_ context.Context, req *pluginv2.Mutate_Request) (*pluginv2.Mutate_Response, error) {
	pod := &corev1.Pod{}
	if err := decode.Object([]byte(req.GetObject()), pod); err != nil {
		return nil, fmt.Errorf("decode the Pod: %w", err)
	}
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	pod.Spec.NodeSelector["pool"] = value
	if !s.encode {
		return &pluginv2.Mutate_Response{Object: req.GetObject(), Mutated: true}, nil
	}
	out, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encode the Pod: %w", err)
	}
	return &pluginv2.Mutate_Response{Object: string(out), Mutated: true}, nil
}

// init serves boundServer instead of the hook when the program is built with -X
// main.field=bound or bound-encode (TestV2Throughput builds this file only then: it needs
// internal/decode, which older synchook builds, the baseline-typed variant, lack) and started
// by vcluster.
func init() {
	if (field == "bound" || field == "bound-encode") && bridgev2.Started(os.Args[1:], os.Getenv) {
		if os.Getenv("GOGC") == "" { // the collector's target synchook's plugin runs with
			debug.SetGCPercent(plugin.DefaultGCPercent)
		}
		bridgev2.ServePlugin(boundServer{encode: field == "bound-encode"}, bridgev2.ServeOptions{})
		os.Exit(0)
	}
}
