package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
)

// The reference plugins: what vcluster users run today, measured in the same run as synchook.

// sdkLabel is the label every reference plugin and synchook's bench config add.
const sdkLabel, sdkValue = "synchook.io/bench", "true"

// sdkMutate is what a vcluster-sdk plugin does per Mutate call: decode the request into the
// typed object (encoding/json), run the hook (one label), encode the whole object and answer
// mutated only when the JSON changed.
func sdkMutate(object string) (string, bool, error) {
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(object), pod); err != nil {
		return "", false, err
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[sdkLabel] = sdkValue
	out, err := json.Marshal(pod)
	if err != nil {
		return "", false, err
	}
	if bytes.Equal(out, []byte(object)) {
		return "", false, nil
	}
	return string(out), true, nil
}

// sdkPluginV1 is the vcluster-sdk style plugin over protocol v1 (a sidecar's remote.Plugin).
type sdkPluginV1 struct {
	remote.UnimplementedPluginServer
}

func (sdkPluginV1) Mutate(_ context.Context, req *remote.MutateRequest) (*remote.MutateResult, error) {
	obj, mutated, err := sdkMutate(req.GetObject())
	if err != nil {
		return nil, err
	}
	return &remote.MutateResult{Object: obj, Mutated: mutated}, nil
}

// referencePluginV2 is a reference plugin over protocol v2: "sdk" (vcluster-sdk style) or
// "echo" (the whole object straight back: the physical floor of the v2 path).
type referencePluginV2 struct {
	pluginv2.UnimplementedPluginServer
	echo bool
}

func (p referencePluginV2) Initialize(context.Context, *pluginv2.Initialize_Request) (*pluginv2.Initialize_Response, error) {
	return &pluginv2.Initialize_Response{}, nil
}

func (p referencePluginV2) GetPluginConfig(context.Context, *pluginv2.GetPluginConfig_Request) (*pluginv2.GetPluginConfig_Response, error) {
	return &pluginv2.GetPluginConfig_Response{Config: `{"clientHooks":[{"apiVersion":"v1","kind":"Pod","types":["CreatePhysical"]}]}`}, nil
}

func (p referencePluginV2) Mutate(_ context.Context, req *pluginv2.Mutate_Request) (*pluginv2.Mutate_Response, error) {
	if p.echo {
		return &pluginv2.Mutate_Response{Object: req.GetObject(), Mutated: true}, nil
	}
	obj, mutated, err := sdkMutate(req.GetObject())
	if err != nil {
		return nil, err
	}
	return &pluginv2.Mutate_Response{Object: obj, Mutated: mutated}, nil
}

// ReferencePluginEnv selects, in a process vcluster-style started as a plugin v2 (the magic
// cookie, no arguments), a reference plugin instead of synchook: "sdk" or "echo".
const ReferencePluginEnv = "SYNCHOOK_BENCH_REFERENCE_PLUGIN"

// ServeReferencePluginV2 serves the reference plugin v2 named by ReferencePluginEnv with
// go-plugin, as vcluster loads plugins, until the caller ends it. It is what cmd/synchook-bench
// runs when started that way.
func ServeReferencePluginV2(name string) error {
	switch name {
	case "sdk", "echo":
	default:
		return fmt.Errorf("%s=%q: want sdk or echo", ReferencePluginEnv, name)
	}
	bridgev2.ServePlugin(referencePluginV2{echo: name == "echo"}, bridgev2.ServeOptions{DefaultServer: true})
	return nil
}

// pluginV2 is a plugin process started and connected the way vcluster's plugin v2 manager
// does it: go-plugin, gRPC only, one kept connection.
type pluginV2 struct {
	client *goplugin.Client
	rpc    pluginv2.PluginClient
	pid    int
}

// startPluginV2 starts binary as a vcluster plugin v2 with env added to this process's
// environment.
func startPluginV2(binary string, env ...string) (*pluginV2, error) {
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), env...)
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  bridgev2.Handshake,
		Plugins:          goplugin.PluginSet{bridgev2.PluginName: bridgev2.ClientPlugin()},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr}),
	})
	rpc, err := c.Client()
	if err != nil {
		c.Kill()
		return nil, fmt.Errorf("start plugin v2 %v: %w", env, err)
	}
	raw, err := rpc.Dispense(bridgev2.PluginName)
	if err != nil {
		c.Kill()
		return nil, err
	}
	p := &pluginV2{client: c, rpc: raw.(pluginv2.PluginClient)}
	if rc := c.ReattachConfig(); rc != nil {
		p.pid = rc.Pid
	}
	if _, err := p.rpc.Initialize(context.Background(), &pluginv2.Initialize_Request{Config: "{}"}); err != nil {
		c.Kill()
		return nil, err
	}
	return p, nil
}

func (p *pluginV2) stop() { p.client.Kill() }

// cpu is the plugin process's CPU time so far.
func (p *pluginV2) cpu() (time.Duration, error) {
	if p.pid == 0 {
		return 0, errors.New("plugin pid unknown")
	}
	return processCPU(p.pid)
}

// caller calls Mutate the way vcluster's v2 manager does on its kept connection: encode the
// typed object, call, decode a mutated answer INTO the object. labelled says the answer must
// carry the bench label (false for the echo floor).
func (p *pluginV2) caller(pod *corev1.Pod, labelled bool) func(context.Context) error {
	return func(ctx context.Context) error {
		obj := pod.DeepCopy()
		data, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := p.rpc.Mutate(ctx, &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Object: string(data), Type: "CreatePhysical"})
		if err != nil {
			return err
		}
		return readAnswer(obj, res.GetMutated(), res.GetObject(), labelled)
	}
}

// readAnswer reads a plugin's answer as vcluster's managers do (both protocols): a mutated
// answer is decoded INTO obj, the object that was sent. labelled says the result must carry
// the bench label.
func readAnswer(obj *corev1.Pod, mutated bool, answer string, labelled bool) error {
	if mutated {
		if err := json.Unmarshal([]byte(answer), obj); err != nil {
			return err
		}
	}
	if labelled && obj.Labels[sdkLabel] != sdkValue {
		return errors.New("the answer lacks the label")
	}
	return nil
}
