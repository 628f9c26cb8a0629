package bridgev2_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
)

// undoRegistry labels pods on CreatePhysical with automatic undo on, sealing with keeper's
// ring: it announces Pod CreatePhysical and GetPhysical (the undo read).
func undoRegistry(keeper *undo.Keeper) *engine.Registry {
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keeper})
	reg.MustRegister(hooks.NewFunc("tenant-label", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical},
		func(_ context.Context, o client.Object) (client.Object, error) {
			o.SetLabels(map[string]string{"tenant": "a"})
			return o, nil
		}))
	return reg
}

// keyServer is a Server with Options.Keys on a new Keeper, served over go-plugin, with its log.
type keyServer struct {
	pc        pluginv2.PluginClient
	keeper    *undo.Keeper
	logs      *testenv.LogSink
	fallbacks *atomic.Int32
}

func startKeyServer(t *testing.T, opts bridgev2.Options) keyServer {
	t.Helper()
	ks := keyServer{keeper: undo.NewKeeper(nil), logs: &testenv.LogSink{}, fallbacks: &atomic.Int32{}}
	opts.Keys, opts.Log = ks.keeper, ks.logs.Logger()
	opts.OnKeyFallback = func() { ks.fallbacks.Add(1) }
	srv, err := bridgev2.New(engine.NewRunner(undoRegistry(ks.keeper), engine.RunnerOptions{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	ks.pc = dispenseServer(t, srv, io.Discard)
	t.Cleanup(srv.Close)
	return ks
}

// initRequest is vcluster's Initialize request for a host reached with kubeconfig and the
// vcluster in namespace (as pkg/plugin/v2's buildInitRequest sends it: both kubeconfigs set).
func initRequest(t *testing.T, kubeconfig []byte, namespace string) *pluginv2.Initialize_Request {
	t.Helper()
	data, err := json.Marshal(map[string]any{
		"physicalClusterConfig": kubeconfig,
		"workloadConfig":        kubeconfig,
		"syncerConfig":          kubeconfig,
		"currentNamespace":      namespace,
		"workingDir":            "/plugins/synchook",
		"port":                  10099,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &pluginv2.Initialize_Request{Config: string(data)}
}

// kubeconfigFor returns a kubeconfig for cfg's user, reaching the apiserver at server
// (cfg.Host when empty).
func kubeconfigFor(t *testing.T, cfg *rest.Config, server string) []byte {
	t.Helper()
	if server == "" {
		server = cfg.Host
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["host"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData, TLSServerName: cfg.ServerName}
	kc.AuthInfos["host"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["host"] = &clientcmdapi.Context{Cluster: "host", AuthInfo: "host"}
	kc.CurrentContext = "host"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// announced returns the hook types GetPluginConfig announces for apiVersion/kind.
func announced(t *testing.T, pc pluginv2.PluginClient, apiVersion, kind string) []string {
	t.Helper()
	res, err := pc.GetPluginConfig(t.Context(), &pluginv2.GetPluginConfig_Request{})
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
		t.Fatalf("plugin config %s: %v", res.GetConfig(), err)
	}
	for _, h := range cfg.ClientHooks {
		if h.APIVersion == apiVersion && h.Kind == kind {
			return h.Types
		}
	}
	return nil
}

// checkNoCredentials fails t when text holds a piece of the kubeconfig's credentials or of a
// key ring's secrets.
func checkNoCredentials(t *testing.T, what, text string, cfg *rest.Config, ring *undo.Ring) {
	t.Helper()
	var pieces []string
	for _, pem := range [][]byte{cfg.KeyData, cfg.CertData} {
		if lines := strings.Split(string(pem), "\n"); len(lines) > 2 {
			pieces = append(pieces, lines[1][:32])
		}
	}
	if ring != nil {
		keys, err := ring.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(keys), "\n") {
			if f := strings.Fields(l); len(f) == 2 && !strings.HasPrefix(l, "#") {
				pieces = append(pieces, f[1][:24])
			}
		}
	}
	for _, p := range pieces {
		if strings.Contains(text, p) || strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(p))[:24]) {
			t.Errorf("%s holds a credential or key:\n%s", what, text)
		}
	}
}

func TestInitializeReadsTheUndoKeySecret(t *testing.T) {
	env := testenv.Start(t)
	host, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newNamespace := func(t *testing.T) string {
		t.Helper()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "vcluster-"}}
		if err := host.Create(t.Context(), ns); err != nil {
			t.Fatal(err)
		}
		return ns.Name
	}
	kubeconfig := kubeconfigFor(t, env.Config, "")
	// reachable is the KeyTimeout of the cases whose host answers: Initialize must get the
	// Secret within it, and the default 5 s is a budget that a loaded envtest apiserver (with
	// the race detector in this process) can exceed. The cases here are about what Initialize
	// reads, not how fast; a minute costs nothing when the host answers at once.
	const reachable = time.Minute

	t.Run("a first start creates the Secret and seals with its key", func(t *testing.T) {
		ns := newNamespace(t)
		ks := startKeyServer(t, bridgev2.Options{KeyTimeout: reachable})
		if _, err := ks.pc.Initialize(t.Context(), initRequest(t, kubeconfig, ns)); err != nil {
			t.Fatalf("Initialize: %v", err)
		}
		ring := ks.keeper.Ring()
		if ring == nil {
			t.Fatalf("the keeper holds no ring after Initialize:\n%s", ks.logs)
		}
		stored, kinds, err := undokey.Read(t.Context(), host, ns, undokey.DefaultSecretName)
		if err != nil {
			t.Fatal(err)
		}
		if !stored.Contains(ring) || !ring.Contains(stored) || len(kinds) != 0 {
			t.Errorf("Secret holds %v and kinds %v, keeper %v", stored, kinds, ring)
		}
		if n := ks.fallbacks.Load(); n != 0 {
			t.Errorf("OnKeyFallback called %d times", n)
		}
		if got := announced(t, ks.pc, "v1", "Pod"); !slices.Equal(got, []string{"CreatePhysical", "GetPhysical"}) {
			t.Errorf("Pod announces %v", got)
		}
		checkNoCredentials(t, "the log", ks.logs.String(), env.Config, ring)
	})

	t.Run("kinds an earlier process sealed undos on get their reads announced", func(t *testing.T) {
		ns := newNamespace(t)
		ring, err := undo.GenerateRing()
		if err != nil {
			t.Fatal(err)
		}
		keys, err := ring.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		if err := host.Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "undo-keys"},
			Data:       map[string][]byte{undokey.KeysItem: keys, undokey.KindsItem: []byte("v1/ConfigMap physical\n")},
		}); err != nil {
			t.Fatal(err)
		}
		ks := startKeyServer(t, bridgev2.Options{KeySecretName: "undo-keys", KeyTimeout: reachable})
		if got := announced(t, ks.pc, "v1", "ConfigMap"); got != nil {
			t.Fatalf("ConfigMap announced %v before Initialize", got)
		}
		if _, err := ks.pc.Initialize(t.Context(), initRequest(t, kubeconfig, ns)); err != nil {
			t.Fatalf("Initialize: %v", err)
		}
		if got := ks.keeper.Ring(); got == nil || !got.Contains(ring) || !ring.Contains(got) {
			t.Fatalf("the keeper holds %v, want the stored %v:\n%s", got, ring, ks.logs)
		}
		if got := announced(t, ks.pc, "v1", "ConfigMap"); !slices.Equal(got, []string{"GetPhysical"}) {
			t.Errorf("ConfigMap announces %v, want [GetPhysical]", got)
		}
		if got := announced(t, ks.pc, "v1", "Pod"); !slices.Equal(got, []string{"CreatePhysical", "GetPhysical"}) {
			t.Errorf("Pod announces %v", got)
		}
		res, err := ks.pc.Mutate(t.Context(), &pluginv2.Mutate_Request{
			ApiVersion: "v1", Kind: "ConfigMap", Type: "GetPhysical",
			Object: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"b"},"data":{"k":"v"}}`,
		})
		if err != nil || res.GetMutated() {
			t.Errorf("GetPhysical of a ConfigMap without an undo: mutated=%v, %v", res.GetMutated(), err)
		}
		if _, err := ks.logs.WaitFor(t.Context(), "announcing reads", "ConfigMap"); err != nil {
			t.Error(err)
		}
		checkNoCredentials(t, "the log", ks.logs.String(), env.Config, ring)
	})

	t.Run("a host that answers only after Initialize gives up is read in the background", func(t *testing.T) {
		ns := newNamespace(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
		ks := startKeyServer(t, bridgev2.Options{KeyTimeout: 2 * time.Second, KeyRetry: 20 * time.Millisecond})
		if _, err := ks.pc.Initialize(t.Context(), initRequest(t, kubeconfigFor(t, env.Config, "https://"+addr), ns)); err != nil {
			t.Fatalf("Initialize: %v", err)
		}
		if ks.keeper.Ring() != nil || ks.fallbacks.Load() != 1 {
			t.Fatalf("before the host answers: ring %v, %d fallbacks", ks.keeper.Ring(), ks.fallbacks.Load())
		}
		// Until the key loads, a hooked write is refused as a failed precondition (vcluster
		// retries it; it could not write the host anyway), never answered with an undo no
		// read could trust.
		write := &pluginv2.Mutate_Request{
			ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical",
			Object: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"b"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`,
		}
		if _, err := ks.pc.Mutate(t.Context(), write); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("a hooked write before the key loads: %v, want FailedPrecondition", err)
		}
		proxy(t, addr, env.Config.Host)
		testenv.Eventually(t, time.Minute, "the keeper gets the ring", func() error { // a retry every 20 ms; a minute for a loaded apiserver
			if ks.keeper.Ring() == nil {
				return fmt.Errorf("no ring yet:\n%s", ks.logs)
			}
			return nil
		})
		if res, err := ks.pc.Mutate(t.Context(), write); err != nil || !res.GetMutated() || !strings.Contains(res.GetObject(), `"synchook.io/undo":"s2.`) {
			t.Errorf("the hooked write once the key loaded: mutated=%v, %v; want it through, sealed", res.GetMutated(), err)
		}
		if _, err := ks.logs.WaitFor(t.Context(), "read the undo key Secret after Initialize"); err != nil {
			t.Error(err)
		}
		if n := ks.fallbacks.Load(); n != 1 {
			t.Errorf("OnKeyFallback called %d times, want 1", n)
		}
	})
}

// proxy forwards TCP connections from listen (host:port) to the host of the URL target until t
// ends.
func proxy(t *testing.T, listen, target string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	to := u.Host
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer down.Close()
				up, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer up.Close()
				go func() {
					_, _ = io.Copy(up, down)
					up.Close()
				}()
				_, _ = io.Copy(down, up)
			}()
		}
	}()
}

func TestInitializeAnswersAtOnceWhenTheHostIsUnreachable(t *testing.T) {
	port := testenv.FreePort(t) // free a moment ago, and nothing listens on it
	kc := clientcmdapi.NewConfig()
	kc.Clusters["host"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:" + strconv.Itoa(port), InsecureSkipTLSVerify: true}
	kc.AuthInfos["host"] = &clientcmdapi.AuthInfo{Token: "kubeconfig-token-canary"}
	kc.Contexts["host"] = &clientcmdapi.Context{Cluster: "host", AuthInfo: "host"}
	kc.CurrentContext = "host"
	kubeconfig, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		req  *pluginv2.Initialize_Request
		want string // in the one error line
	}{
		{name: "a host that refuses connections", req: initRequest(t, kubeconfig, "vcluster-a"), want: "trying again in the background"},
		{name: "a config that is not JSON", req: &pluginv2.Initialize_Request{Config: "{kubeconfig-token-canary"}, want: "not the JSON of vcluster's InitConfig"},
		{name: "a config without a kubeconfig", req: &pluginv2.Initialize_Request{Config: `{"currentNamespace":"a"}`}, want: "no host kubeconfig"},
		{name: "a kubeconfig that does not load", req: initRequest(t, []byte("kubeconfig-token-canary: ["), "a"), want: "does not load"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// "At once": a refused loopback connection or a config that does not parse, a few
			// milliseconds, so 10 s is a bound a loaded machine meets by far; the KeyTimeout that
			// Initialize would wait out if it waited for the key is a minute, well past it.
			const atOnce, keyTimeout = 10 * time.Second, time.Minute
			ks := startKeyServer(t, bridgev2.Options{KeyTimeout: keyTimeout, KeyRetry: 10 * time.Millisecond})
			begin := time.Now()
			if _, err := ks.pc.Initialize(t.Context(), tc.req); err != nil {
				t.Fatalf("Initialize: %v", err)
			}
			if d := time.Since(begin); d > atOnce {
				t.Errorf("Initialize took %s, want it to answer at once (within %s), not wait for the key (KeyTimeout %s)", d, atOnce, keyTimeout)
			}
			if ks.keeper.Ring() != nil {
				t.Errorf("the keeper holds %v", ks.keeper.Ring())
			}
			if tc.want == "trying again in the background" {
				// Let a few background tries fail: they must not log at level 0 or count again.
				testenv.Eventually(t, time.Minute, "three failed tries", func() error {
					if n := strings.Count(ks.logs.String(), "try failed"); n < 2 {
						return fmt.Errorf("%d failed tries logged", n)
					}
					return nil
				})
			}
			if n := ks.fallbacks.Load(); n != 1 {
				t.Errorf("OnKeyFallback called %d times, want 1", n)
			}
			var errorLines []string
			for _, l := range ks.logs.Lines() {
				if strings.Contains(l, `"error"=`) && !strings.Contains(l, "try failed") {
					errorLines = append(errorLines, l)
				}
			}
			if len(errorLines) != 1 || !strings.Contains(errorLines[0], tc.want) {
				t.Errorf("want one error line with %q, got:\n%s", tc.want, ks.logs)
			}
			if strings.Contains(ks.logs.String(), "kubeconfig-token-canary") {
				t.Errorf("the log holds the request's config:\n%s", ks.logs)
			}
			if got := announced(t, ks.pc, "v1", "Pod"); !slices.Equal(got, []string{"CreatePhysical", "GetPhysical"}) {
				t.Errorf("Pod announces %v", got)
			}
		})
	}
}
