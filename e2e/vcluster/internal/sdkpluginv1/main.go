// Command sdkpluginv1 is a vcluster plugin v1 that does per call what a v1 plugin written with
// vcluster-sdk does: decode the request's JSON into a typed *corev1.Pod with encoding/json, set
// the label vcluster.example.com/tenant: team-a, encode the whole object again and answer
// mutated=true. It is the "sdk-style" reference of TestV1Throughput, in its own process like
// synchook's plugin v1 bridge.
//
// It serves vcluster's remote.Plugin service (a default grpc.NewServer) on a free loopback
// port and registers that address with vcluster's plugin v1 manager, whose remote.VCluster
// service is at -vcluster-address, under -name with a client hook for v1 Pod CreatePhysical.
// RegisterPlugin is retried every 50 ms until the manager answers, since the manager may
// start listening after the plugin. It runs until SIGTERM or SIGINT, then stops the server
// and exits 0.
//
//	sdkpluginv1 -vcluster-address 127.0.0.1:10099 [-name sdk-style]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/loft-sh/vcluster/pkg/plugin/v1/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
)

// plugin answers Mutate the sdk way; every other remote.Plugin method is unimplemented, as
// vcluster's v1 manager calls only Mutate for client hooks.
type plugin struct {
	remote.UnimplementedPluginServer
}

// Mutate decodes the object into a typed Pod, sets the tenant label, encodes it and answers
// mutated=true.
func (plugin) Mutate(_ context.Context, req *remote.MutateRequest) (*remote.MutateResult, error) {
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
	return &remote.MutateResult{Object: string(out), Mutated: true}, nil
}

func main() {
	managerAddr := flag.String("vcluster-address", "", "address of vcluster's plugin v1 manager (remote.VCluster), required")
	name := flag.String("name", "sdk-style", "plugin name to register, one of the manager's options.Plugins")
	flag.Parse()
	if *managerAddr == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	srv := grpc.NewServer()
	remote.RegisterPluginServer(srv, plugin{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	conn, err := grpc.NewClient(*managerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fatalf("dial vcluster at %s: %v", *managerAddr, err)
	}
	defer conn.Close()
	go register(ctx, remote.NewVClusterClient(conn), &remote.RegisterPluginRequest{
		Version: "v1", Name: *name, Address: addr,
		ClientHooks: []*remote.ClientHook{{ApiVersion: "v1", Kind: "Pod", Types: []string{"CreatePhysical"}}},
	})

	select {
	case <-ctx.Done():
		srv.Stop()
	case err := <-served: // Serve returns nil only after Stop
		fatalf("serve on %s: %v", addr, err)
	}
}

// register calls RegisterPlugin every 50 ms until it succeeds (the manager listens) or ctx
// ends.
func register(ctx context.Context, c remote.VClusterClient, req *remote.RegisterPluginRequest) {
	for ctx.Err() == nil {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.RegisterPlugin(callCtx, req)
		cancel()
		if err == nil {
			fmt.Fprintf(os.Stderr, "sdkpluginv1: registered %q at %s\n", req.GetName(), req.GetAddress())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sdkpluginv1: "+format+"\n", args...)
	os.Exit(1)
}
