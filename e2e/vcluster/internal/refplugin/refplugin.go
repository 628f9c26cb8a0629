// Package refplugin is the common part of the reference vcluster plugin v2 binaries that the
// benchmark compares synchook with (../sdkplugin and ../echoplugin): a go-plugin gRPC server
// using vcluster's own handshake (v2.HandshakeConfig) and generated service
// (pluginv2.RegisterPluginServer), so that vcluster's manager loads them exactly like any
// other plugin.
package refplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-plugin"
	v2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	"github.com/loft-sh/vcluster/pkg/plugin/v2/pluginv2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MutateFunc answers one Mutate call: the object to send back and whether it was mutated.
type MutateFunc func(ctx context.Context, req *pluginv2.Mutate_Request) (object string, mutated bool, err error)

// Server is a minimal pluginv2.PluginServer: Initialize accepts any JSON init config,
// SetLeader anything, GetPluginConfig answers the configured client hooks and Mutate calls
// Handle for the hooks it registered (and answers mutated=false for any other
// version/kind/type).
type Server struct {
	pluginv2.UnimplementedPluginServer

	// ClientHooks are answered by GetPluginConfig.
	ClientHooks []*v2.ClientHook
	// Handle answers the Mutate calls for the registered hooks.
	Handle MutateFunc

	registered map[[3]string]bool
}

// Initialize checks that the init config is JSON; the reference plugins need nothing from it.
func (s *Server) Initialize(_ context.Context, req *pluginv2.Initialize_Request) (*pluginv2.Initialize_Response, error) {
	initConfig := &v2.InitConfig{}
	if err := json.Unmarshal([]byte(req.GetConfig()), initConfig); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "decode init config: %v", err)
	}
	return &pluginv2.Initialize_Response{}, nil
}

// SetLeader is a no-op: the reference plugins have no controllers.
func (s *Server) SetLeader(context.Context, *pluginv2.SetLeader_Request) (*pluginv2.SetLeader_Response, error) {
	return &pluginv2.SetLeader_Response{}, nil
}

// GetPluginConfig answers the client hooks as vcluster's PluginConfig JSON.
func (s *Server) GetPluginConfig(context.Context, *pluginv2.GetPluginConfig_Request) (*pluginv2.GetPluginConfig_Response, error) {
	encoded, err := json.Marshal(&v2.PluginConfig{ClientHooks: s.ClientHooks})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode plugin config: %v", err)
	}
	return &pluginv2.GetPluginConfig_Response{Config: string(encoded)}, nil
}

// Mutate dispatches to s.Handle when the version/kind/type is one the plugin registered.
func (s *Server) Mutate(ctx context.Context, req *pluginv2.Mutate_Request) (*pluginv2.Mutate_Response, error) {
	if !s.registered[[3]string{req.GetApiVersion(), req.GetKind(), req.GetType()}] {
		return &pluginv2.Mutate_Response{}, nil
	}
	object, mutated, err := s.Handle(ctx, req)
	if err != nil {
		return nil, err
	}
	return &pluginv2.Mutate_Response{Object: object, Mutated: mutated}, nil
}

// grpcPlugin is the go-plugin GRPCPlugin that registers the pluginv2 service.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	server *Server
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginv2.RegisterPluginServer(s, p.server)
	return nil
}

func (p *grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("the reference plugins only serve")
}

var _ plugin.GRPCPlugin = (*grpcPlugin)(nil)

// Serve serves s as a vcluster plugin v2 until vcluster kills the process. Started by hand
// (without the magic cookie) it prints go-plugin's message and exits with code 1.
func Serve(s *Server) {
	if s.Handle == nil {
		fmt.Fprintln(os.Stderr, "refplugin: Server.Handle is nil")
		os.Exit(2)
	}
	s.registered = map[[3]string]bool{}
	for _, h := range s.ClientHooks {
		for _, t := range h.Types {
			s.registered[[3]string{h.APIVersion, h.Kind, t}] = true
		}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: v2.HandshakeConfig,
		Plugins:         plugin.PluginSet{"plugin": &grpcPlugin{server: s}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
