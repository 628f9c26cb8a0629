package bridgev2_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"strings"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/engine"
)

// testRegistry labels pods on CreatePhysical (and deletes the label host-only), strips
// spec.nodeName on GetPhysical and refuses every pod on UpdatePhysical.
func testRegistry(t *testing.T) *engine.Registry {
	t.Helper()
	reg := engine.NewRegistry(nil)
	pod := func(fn func(*corev1.Pod) error) hooks.MutateFunc {
		return func(_ context.Context, o client.Object) (client.Object, error) {
			return o, fn(o.(*corev1.Pod))
		}
	}
	reg.MustRegister(
		hooks.NewFunc("tenant-label", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, pod(func(p *corev1.Pod) error {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels["tenant"] = "a"
			delete(p.Labels, "host-only")
			return nil
		})),
		hooks.NewFunc("strip-node", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, pod(func(p *corev1.Pod) error {
			p.Spec.NodeName = ""
			return nil
		})),
		hooks.NewFunc("refuse", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical}, pod(func(*corev1.Pod) error {
			return errors.New("pods may not be updated")
		})),
	)
	return reg
}

// dispense serves reg in go-plugin's test mode and returns the client side of a real go-plugin
// connection, as vcluster's manager dispenses it.
func dispense(t *testing.T, reg *engine.Registry) pluginv2.PluginClient {
	t.Helper()
	srv, err := bridgev2.New(engine.NewRunner(reg, engine.RunnerOptions{}), bridgev2.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dispenseServer(t, srv, io.Discard)
}

// dispenseServer is dispense for a Server made by the caller, go-plugin's own log going to
// stderr.
func dispenseServer(t *testing.T, srv *bridgev2.Server, stderr io.Writer) pluginv2.PluginClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *goplugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go bridgev2.Serve(srv, bridgev2.ServeOptions{Stderr: stderr, Test: &goplugin.ServeTestConfig{
		Context: ctx, ReattachConfigCh: reattach, CloseCh: closed,
	}})
	var cfg *goplugin.ReattachConfig
	select {
	case cfg = <-reattach:
	case <-t.Context().Done():
		t.Fatal("plugin did not start")
	}
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  bridgev2.Handshake,
		Plugins:          goplugin.PluginSet{bridgev2.PluginName: bridgev2.ClientPlugin()},
		Reattach:         cfg,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
	})
	t.Cleanup(func() {
		c.Kill()
		cancel()
		<-closed
	})
	rpc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rpc.Dispense(bridgev2.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(pluginv2.PluginClient)
}

func TestServerOverGoPlugin(t *testing.T) {
	pc := dispense(t, testRegistry(t))
	ctx := t.Context()
	if _, err := pc.Initialize(ctx, &pluginv2.Initialize_Request{Config: `{"workingDir":"/plugins/synchook"}`}); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if _, err := pc.SetLeader(ctx, &pluginv2.SetLeader_Request{}); err != nil {
		t.Fatalf("SetLeader: %v", err)
	}

	t.Run("GetPluginConfig announces every hooked GVK with its hook types", func(t *testing.T) {
		res, err := pc.GetPluginConfig(ctx, &pluginv2.GetPluginConfig_Request{})
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			ClientHooks []struct {
				APIVersion string   `json:"apiVersion"`
				Kind       string   `json:"kind"`
				Types      []string `json:"types"`
			} `json:"clientHooks"`
		}
		if err := json.Unmarshal([]byte(res.GetConfig()), &cfg); err != nil {
			t.Fatalf("config %s: %v", res.GetConfig(), err)
		}
		if len(cfg.ClientHooks) != 1 || cfg.ClientHooks[0].APIVersion != "v1" || cfg.ClientHooks[0].Kind != "Pod" ||
			strings.Join(cfg.ClientHooks[0].Types, ",") != "CreatePhysical,UpdatePhysical,GetPhysical" {
			t.Errorf("client hooks %s", res.GetConfig())
		}
	})

	// mutate sends pod as vcluster does and decodes the answer INTO that pod, as vcluster does.
	mutate := func(t *testing.T, hookType string, pod *corev1.Pod) (*corev1.Pod, error) {
		t.Helper()
		data, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		res, err := pc.Mutate(ctx, &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Object: string(data), Type: hookType})
		if err != nil {
			return nil, err
		}
		if res.GetMutated() {
			if err := json.Unmarshal([]byte(res.GetObject()), pod); err != nil {
				t.Fatalf("decode the answer into the sent pod: %v", err)
			}
		} else if res.GetObject() != "" {
			t.Errorf("mutated=false with an object")
		}
		return pod, nil
	}
	newPod := func() *corev1.Pod {
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "web", "host-only": "x"}},
			Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		}
	}

	t.Run("a label is added and a removed label is really gone after decode-into-existing", func(t *testing.T) {
		got, err := mutate(t, "CreatePhysical", newPod())
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"app": "web", "tenant": "a"}; !maps.Equal(got.Labels, want) {
			t.Errorf("labels %v, want %v", got.Labels, want)
		}
	})
	t.Run("a stripped field is really gone after decode-into-existing", func(t *testing.T) {
		got, err := mutate(t, "GetPhysical", newPod())
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.NodeName != "" {
			t.Errorf("nodeName %q survived", got.Spec.NodeName)
		}
	})
	t.Run("a hook error is a gRPC error naming the hook", func(t *testing.T) {
		_, err := mutate(t, "UpdatePhysical", newPod())
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "refuse") {
			t.Errorf("error %v, want PermissionDenied naming hook refuse", err)
		}
	})
	t.Run("a type this project does not implement answers unchanged", func(t *testing.T) {
		res, err := pc.Mutate(ctx, &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Object: "{}", Type: "ApplyPhysical"})
		if err != nil || res.GetMutated() {
			t.Errorf("ApplyPhysical: %v, %v", res, err)
		}
	})
	t.Run("a malformed object is refused with InvalidArgument", func(t *testing.T) {
		for _, obj := range []string{`{"apiVersion":"v1","kind":"Pod","metadata":`, `{"apiVersion":"v1","kind":"Pod","spec":"x"}`} {
			_, err := pc.Mutate(ctx, &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Object: obj, Type: "CreatePhysical"})
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("object %s: error %v, want InvalidArgument", obj, err)
			}
		}
	})
}

func TestStarted(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "VCLUSTER_PLUGIN" {
				return v
			}
			return ""
		}
	}
	cases := []struct {
		name string
		args []string
		env  func(string) string
		want bool
	}{
		{"the magic cookie and no arguments is vcluster starting a plugin", nil, env("vcluster"), true},
		{"arguments mean a command even with the cookie", []string{"serve"}, env("vcluster"), false},
		{"no cookie is not a plugin start", nil, env(""), false},
		{"a wrong cookie value is not a plugin start", nil, env("other"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := bridgev2.Started(tc.args, tc.env); got != tc.want {
				t.Errorf("Started = %v, want %v", got, tc.want)
			}
		})
	}
}
