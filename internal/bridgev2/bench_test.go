package bridgev2_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"runtime"
	"sync"
	"syscall"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/webhook"
)

// sdkStyle is what a vcluster-sdk plugin does per Mutate: decode the request into the typed
// object, run the hook (one label), encode the whole object, answer mutated if the JSON changed.
type sdkStyle struct {
	pluginv2.UnimplementedPluginServer
}

func (sdkStyle) Mutate(_ context.Context, req *pluginv2.Mutate_Request) (*pluginv2.Mutate_Response, error) {
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(req.GetObject()), pod); err != nil {
		return nil, err
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels["vcluster.example.com/tenant"] = "team-a"
	out, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(out, []byte(req.GetObject())) {
		return &pluginv2.Mutate_Response{}, nil
	}
	return &pluginv2.Mutate_Response{Object: string(out), Mutated: true}, nil
}

// connect serves srv in go-plugin's test mode and dispenses a client, as vcluster's manager.
func connect(b testing.TB, srv pluginv2.PluginServer, serve bridgev2.ServeOptions) pluginv2.PluginClient {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *goplugin.ReattachConfig, 1)
	closed := make(chan struct{})
	serve.Stderr = io.Discard
	serve.Test = &goplugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed}
	go bridgev2.ServePlugin(srv, serve)
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: bridgev2.Handshake, Plugins: goplugin.PluginSet{bridgev2.PluginName: bridgev2.ClientPlugin()},
		Reattach: <-reattach, AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
	})
	b.Cleanup(func() { c.Kill(); cancel(); <-closed })
	rpc, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	raw, err := rpc.Dispense(bridgev2.PluginName)
	if err != nil {
		b.Fatal(err)
	}
	return raw.(pluginv2.PluginClient)
}

// reportCPU starts measuring the CPU time of this process (both ends of the connection, the
// garbage collector included) and returns the function that reports it per operation as
// cpu-ns/op: on a machine shared with other work it varies much less than ns/op, which counts
// the time the benchmark waits for the CPU too.
func reportCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() { b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op") }
}

// processCPU returns the user and system CPU time this process has used, in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

const benchConfig = `
hooks:
  - name: tenant
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels: {labels: {vcluster.example.com/tenant: team-a}}
`

// BenchmarkV2Mutate compares, over the same in-process go-plugin connection, a vcluster-sdk
// style plugin with synchook (the same one-label hook from config) on the ~5 KiB Pod, and the
// caller's side as vcluster does it: encode the typed Pod, call, decode the answer into it.
// The ratio that counts is ns/op of sdk-style over synchook, sequential and at 16 callers;
// "server" measures the plugin's own work alone.
//
// synchook runs two ways: "synchook" is the bare engine (no undo, no limits, no metrics, no
// logger); "synchook-sealed" is the plugin as ServePluginV2 builds it (undo on and sealed, the
// default concurrency limit, the metrics recorder as observer, an info-level JSON logger), as
// deployed. (Undo without a key is gone: a hooked write without a key is refused.)
func BenchmarkV2Mutate(b *testing.B) {
	cfg, err := config.Parse([]byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	bare := func() pluginv2.PluginServer {
		reg := engine.NewRegistry(nil)
		if err := cfg.Build(reg); err != nil {
			b.Fatal(err)
		}
		s, err := bridgev2.New(engine.NewRunner(reg, engine.RunnerOptions{}), bridgev2.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	// deployed mirrors sidecar.ServePluginV2's registry, runner and server options; the log
	// lines are encoded as the binary's are (zap JSON at info level) and dropped.
	deployed := func(keys *undo.Keeper) pluginv2.PluginServer {
		reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
		if err := cfg.Build(reg); err != nil {
			b.Fatal(err)
		}
		log := zap.New(zap.WriteTo(io.Discard))
		rec := metrics.New(reg, log.WithName("hooks"))
		runner := engine.NewRunner(reg, engine.RunnerOptions{
			MaxConcurrent: sidecar.DefaultMaxConcurrentHooks, Observer: rec, Log: log.WithName("hook"),
		})
		s, err := bridgev2.New(runner, bridgev2.Options{
			MaxMessageBytes: webhook.DefaultMaxRequestBytes, Metrics: rec, Log: log.WithName("pluginv2"), Keys: keys,
		})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	pod := fixtures.Pod("ns", "web")
	for _, p := range []struct {
		name  string
		srv   pluginv2.PluginServer
		serve bridgev2.ServeOptions
	}{
		{"sdk-style", sdkStyle{}, bridgev2.ServeOptions{DefaultServer: true}},
		{"synchook", bare(), bridgev2.ServeOptions{}},
		{"synchook-sealed", deployed(undo.NewKeeper(ring)), bridgev2.ServeOptions{MaxMessageBytes: webhook.DefaultMaxRequestBytes}},
	} {
		client := connect(b, p.srv, p.serve)
		call := func() {
			obj := pod.DeepCopy()
			data, err := json.Marshal(obj)
			if err != nil {
				b.Fatal(err)
			}
			res, err := client.Mutate(context.Background(), &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Object: string(data), Type: "CreatePhysical"})
			if err != nil {
				b.Fatal(err)
			}
			if !res.GetMutated() {
				b.Fatal("not mutated")
			}
			if err := json.Unmarshal([]byte(res.GetObject()), obj); err != nil {
				b.Fatal(err)
			}
			if obj.Labels["vcluster.example.com/tenant"] != "team-a" {
				b.Fatal("label missing")
			}
		}
		// server is the plugin's own work: Mutate called directly, without gRPC and without
		// the caller's encode and decode, which are the same for every plugin and most of
		// the time of the other sub-benchmarks.
		data, err := json.Marshal(pod)
		if err != nil {
			b.Fatal(err)
		}
		req := &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Object: string(data), Type: "CreatePhysical"}
		serve := func() {
			if res, err := p.srv.Mutate(context.Background(), req); err != nil || !res.GetMutated() {
				b.Error("not mutated", err)
			}
		}
		b.Run(p.name+"/server", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				serve()
			}
		})
		b.Run(p.name+"/server-16-callers", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					serve()
				}
			})
		})
		b.Run(p.name+"/sequential", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				call()
			}
		})
		b.Run(p.name+"/16-callers", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			var wg sync.WaitGroup
			work := make(chan struct{})
			for range 16 {
				wg.Go(func() {
					for range work {
						call()
					}
				})
			}
			for b.Loop() {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
		})
	}
}
