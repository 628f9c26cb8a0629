package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/decode"
	"github.com/synchook/synchook/plugin"
)

// boundServer is what TestV2Throughput's "typed-bound" measures: synchook's v2 plugin server
// (bridgev2.ServePlugin, synchook's gRPC options) whose Mutate only decodes the Pod as
// synchook's typed path does (decode.Object), sets spec.nodeSelector's pool on the decoded Pod
// and answers the request's object back, unchanged and unencoded. It is synchook-typed without
// any of synchook's own steps (the intake scan, the copy before the hook, the compare, the undo
// and the answer): the ratio synchook-typed could reach against sdk-typed if those cost
// nothing, the bound the shared cost (vcluster's manager, gRPC, both sides' copies) implies.
type boundServer struct {
	pluginv2.UnimplementedPluginServer
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

func (boundServer) Mutate(_ context.Context, req *pluginv2.Mutate_Request) (*pluginv2.Mutate_Response, error) {
	pod := &corev1.Pod{}
	if err := decode.Object([]byte(req.GetObject()), pod); err != nil {
		return nil, fmt.Errorf("decode the Pod: %w", err)
	}
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	pod.Spec.NodeSelector["pool"] = value
	return &pluginv2.Mutate_Response{Object: req.GetObject(), Mutated: true}, nil
}

// init serves boundServer instead of the hook when the program is built with -X
// main.field=bound (TestV2Throughput builds this file only then: it needs internal/decode,
// which older synchook builds, the baseline-typed variant, lack) and started by vcluster.
func init() {
	if field == "bound" && bridgev2.Started(os.Args[1:], os.Getenv) {
		if os.Getenv("GOGC") == "" { // the collector's target synchook's plugin runs with
			debug.SetGCPercent(plugin.DefaultGCPercent)
		}
		bridgev2.ServePlugin(boundServer{}, bridgev2.ServeOptions{})
		os.Exit(0)
	}
}
