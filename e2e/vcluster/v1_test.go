package vcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loft-sh/vcluster/config/legacyconfig"
	plugintypes "github.com/loft-sh/vcluster/pkg/plugin/types"
	v1 "github.com/loft-sh/vcluster/pkg/plugin/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectMutator is what the syncer calls on a plugin manager, v1 or v2.
type objectMutator interface {
	MutateObject(ctx context.Context, obj client.Object, hookType string, scheme *runtime.Scheme) error
}

var _ objectMutator = (*v1.Manager)(nil)

// v1StartTimeout bounds vcluster's v1 Manager.Start, which waits for every plugin to register.
const v1StartTimeout = 60 * time.Second

// v1Synchook is synchook's legacy plugin v1 bridge (`synchook serve --plugin-address`) as a
// sidecar process registered with vcluster's plugin v1 manager.
type v1Synchook struct {
	m          *v1.Manager
	cmd        *exec.Cmd
	pluginAddr string // where synchook serves remote.Plugin
	stderr     *syncBuffer
}

// startV1Synchook starts vcluster's plugin v1 manager (its plugin server on a free loopback
// port, waiting for the plugin "synchook") and the synchook binary as a sidecar that registers
// with it, with the hook config y in SYNCHOOK_CONFIG and no VCLUSTER_PLUGIN* variables. It
// returns when Start returned nil; the process gets SIGTERM when tb ends.
func startV1Synchook(tb testing.TB, y string) *v1Synchook {
	tb.Helper()
	bin := binary(tb, binSynchook)
	ports := freePorts(tb, 3)
	managerAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	s := &v1Synchook{pluginAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]), stderr: &syncBuffer{}}

	s.cmd = exec.Command(bin, "serve",
		"--bind-address", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0",
		"--cert-dir", filepath.Join(tb.TempDir(), "certs"),
		"--plugin-address", s.pluginAddr, "--plugin-name", "synchook",
		"--vcluster-address", managerAddr)
	s.cmd.Env = append(environWithout("VCLUSTER_PLUGIN", "SYNCHOOK_CONFIG"), "SYNCHOOK_CONFIG="+y)
	exited := startSidecar(tb, s.cmd, "synchook", s.stderr)

	s.m = startV1Manager(tb, managerAddr, []string{"synchook"}, exited, s.stderr)
	return s
}

// startSidecar starts cmd, a plugin v1 process called name, with its stderr in stderr. When
// tb ends the process gets SIGTERM (SIGKILL after 10 s) and, if tb failed, its stderr is
// logged. The returned channel yields cmd.Wait's result once the process exited and is closed
// after it, so that the cleanup does not wait for a result someone else received.
func startSidecar(tb testing.TB, cmd *exec.Cmd, name string, stderr *syncBuffer) <-chan error {
	tb.Helper()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		close(exited)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if tb.Failed() {
			tb.Logf("%s's stderr:\n%s", name, stderr.String())
		}
	})
	return exited
}

// startV1Manager runs vcluster's v1 Manager.Start listening on addr and waiting for plugins,
// and fails tb when it returns an error, when v1StartTimeout passes or when exited (the
// plugin process, may be nil) ends first. vcluster never stops the manager's gRPC server.
func startV1Manager(tb testing.TB, addr string, plugins []string, exited <-chan error, stderr *syncBuffer) *v1.Manager {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), v1StartTimeout)
	defer cancel()
	m := v1.NewManager()
	started := make(chan error, 1)
	start := time.Now()
	go func() {
		started <- m.Start(ctx, "vcluster-e2e", "vcluster-e2e",
			&rest.Config{Host: "https://127.0.0.1:8443", BearerToken: "dummy"},
			&rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "dummy"},
			syncerConfig(),
			&legacyconfig.LegacyVirtualClusterOptions{
				Name:                "e2e",
				TargetNamespace:     "vcluster-e2e",
				PluginListenAddress: addr,
				Plugins:             plugins,
			})
	}()
	select {
	case err := <-started:
		if err != nil {
			tb.Fatalf("start vcluster's plugin v1 manager on %s: %v", addr, err)
		}
	case err := <-exited:
		cancel()
		<-started
		tb.Fatalf("the plugin exited before it registered (%v); stderr:\n%s", err, stderr.String())
	}
	tb.Logf("vcluster's plugin v1 manager on %s: %v registered after %s", addr, plugins, time.Since(start).Round(time.Millisecond))
	return m
}

// TestV1ManagerRunsSynchook runs synchook's legacy plugin v1 bridge as a sidecar of vcluster's
// own plugin v1 manager and checks what the syncer sees: the client hooks it registered and
// the objects MutateObject leaves behind (vcluster json.Unmarshals the answer INTO the object
// it sent, over a new gRPC connection per call).
func TestV1ManagerRunsSynchook(t *testing.T) {
	s := startV1Synchook(t, synchookConfig)
	m := s.m

	t.Run("the manager registers synchook's client hooks for the configured kinds and hook types", func(t *testing.T) {
		if !m.HasPlugins() || !m.HasClientHooks() {
			t.Errorf("HasPlugins = %v, HasClientHooks = %v, want both", m.HasPlugins(), m.HasClientHooks())
		}
		for _, tc := range []struct {
			vkt  plugintypes.VersionKindType
			want bool
		}{
			{vkt("v1", "Pod", createPhysical), true},
			{vkt("v1", "Pod", updatePhysical), true},
			{vkt("v1", "Pod", getPhysical), true},
			{vkt("v1", "Service", createPhysical), true},
			{vkt("v1", "Secret", createPhysical), true},
			{vkt("v1", "ConfigMap", createPhysical), false},
			{vkt("v1", "ConfigMap", getPhysical), false},
			{vkt("v1", "Pod", "DeletePhysical"), false},
			{vkt("v1", "Pod", applyPhysical), false},
			{vkt("apps/v1", "Deployment", createPhysical), false},
		} {
			if got := m.HasClientHooksForType(tc.vkt); got != tc.want {
				t.Errorf("HasClientHooksForType(%s %s %s) = %v, want %v", tc.vkt.APIVersion, tc.vkt.Kind, tc.vkt.Type, got, tc.want)
			}
		}
	})

	t.Run("the registered hook names synchook and the address it serves on", func(t *testing.T) {
		hooks := m.ClientHooksFor(vkt("v1", "Pod", createPhysical))
		if len(hooks) != 1 {
			t.Fatalf("%d plugins for v1 Pod CreatePhysical, want 1", len(hooks))
		}
		if hooks[0].Name != "synchook" || hooks[0].Address != s.pluginAddr {
			t.Errorf("registered plugin %q at %q, want %q at %q", hooks[0].Name, hooks[0].Address, "synchook", s.pluginAddr)
		}
	})

	for _, tc := range []struct {
		name     string
		obj      client.Object
		hookType string
		want     client.Object
		check    func(t *testing.T, got client.Object) // extra checks, after the comparison with want
	}{
		{
			name:     "a pod created on the host gets the tenant label and the owner annotation and keeps its own labels",
			obj:      testPod(),
			hookType: createPhysical,
			want: withMeta(testPod(),
				map[string]string{"vcluster.example.com/tenant": "team-a"},
				map[string]string{"synchook.io/owner": "platform"}),
			check: func(t *testing.T, got client.Object) {
				if got.GetLabels()["app"] != "web" || got.GetLabels()["vcluster.loft.sh/namespace"] != "default" {
					t.Errorf("labels = %v, want the pod's own labels kept", got.GetLabels())
				}
			},
		},
		{
			name:     "a pod updated on the host gets the same labels and annotation",
			obj:      testPod(),
			hookType: updatePhysical,
			want: withMeta(testPod(),
				map[string]string{"vcluster.example.com/tenant": "team-a"},
				map[string]string{"synchook.io/owner": "platform"}),
		},
		{
			name: "a pod without labels or annotations gets both maps",
			obj: func() client.Object {
				p := testPod()
				p.Labels, p.Annotations = nil, nil
				return p
			}(),
			hookType: createPhysical,
			want: func() client.Object {
				p := testPod()
				p.Labels = map[string]string{"vcluster.example.com/tenant": "team-a"}
				p.Annotations = map[string]string{"synchook.io/owner": "platform"}
				return p
			}(),
		},
		{
			name:     "a pod read from the host really loses the pool label and its node name although vcluster decodes the answer into the object it sent",
			obj:      hostPod(),
			hookType: getPhysical,
			want: func() client.Object {
				p := hostPod()
				delete(p.Labels, "host.example.com/pool")
				p.Spec.NodeName = ""
				return p
			}(),
			check: func(t *testing.T, got client.Object) {
				p := got.(*corev1.Pod)
				if v, ok := p.Labels["host.example.com/pool"]; ok {
					t.Errorf("label host.example.com/pool is still there (value %q): %v", v, p.Labels)
				}
				if p.Spec.NodeName != "" {
					t.Errorf("spec.nodeName = %q, want it gone", p.Spec.NodeName)
				}
				if p.Labels["app"] != "web" {
					t.Errorf("label app = %q, want the pod's own label kept", p.Labels["app"])
				}
				if p.Status.PodIP != "10.0.3.7" {
					t.Errorf("status.podIP = %q, want it kept", p.Status.PodIP)
				}
			},
		},
		{
			name: "a pod read from the host whose only label is the pool label ends without it",
			obj: func() client.Object {
				p := hostPod()
				p.Labels = map[string]string{"host.example.com/pool": "gpu"}
				return p
			}(),
			hookType: getPhysical,
			want: func() client.Object {
				p := hostPod()
				p.Labels = nil
				p.Spec.NodeName = ""
				return p
			}(),
			check: func(t *testing.T, got client.Object) {
				if len(got.GetLabels()) != 0 {
					t.Errorf("labels = %v, want none", got.GetLabels())
				}
			},
		},
		{
			name:     "a service created on the host gets the tenant label",
			obj:      testService(),
			hookType: createPhysical,
			want:     withMeta(testService(), map[string]string{"vcluster.example.com/tenant": "team-a"}, nil),
		},
		{
			name:     "a secret created on the host gets the synced label and its data stays byte-identical",
			obj:      testSecret(),
			hookType: createPhysical,
			want:     withMeta(testSecret(), map[string]string{"vcluster.example.com/synced": "true"}, nil),
			check: func(t *testing.T, got client.Object) {
				if s := got.(*corev1.Secret); !equality.Semantic.DeepEqual(s.Data, testSecret().Data) {
					t.Errorf("secret data = %q, want %q", s.Data, testSecret().Data)
				}
			},
		},
		{
			name:     "a config map, which no hook handles, is left alone without calling the plugin",
			obj:      testConfigMap(),
			hookType: createPhysical,
			want:     testConfigMap(),
		},
		{
			name:     "a hook type synchook did not register is left alone",
			obj:      testPod(),
			hookType: applyPhysical,
			want:     testPod(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.obj.DeepCopyObject().(client.Object)
			if err := m.MutateObject(t.Context(), got, tc.hookType, scheme.Scheme); err != nil {
				t.Fatalf("MutateObject(%s): %v", tc.hookType, err)
			}
			got = withoutUndo(got)
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("MutateObject(%s) left\n%s\nwant\n%s", tc.hookType, mustJSON(t, got), mustJSON(t, tc.want))
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}

	for _, tc := range []struct {
		name   string
		sent   *corev1.Pod
		onHost func(p *corev1.Pod) // what the host does to the pod between the write and the read
	}{
		{
			name: "a pod written to the host and read back comes back exactly as the syncer sent it",
			sent: testPod(),
		},
		{
			name: "a pod without labels or annotations written to the host and read back comes back without them",
			sent: func() *corev1.Pod {
				p := testPod()
				p.Labels, p.Annotations = nil, nil
				return p
			}(),
		},
		{
			name: "a pod written to the host, scheduled there and read back comes back as the syncer sent it, without the host's pool label and node name",
			sent: testPod(),
			onHost: func(p *corev1.Pod) {
				p.Labels["host.example.com/pool"] = "gpu"
				p.Spec.NodeName = "host-node-7"
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onHost := tc.sent.DeepCopy()
			if err := m.MutateObject(t.Context(), onHost, createPhysical, scheme.Scheme); err != nil {
				t.Fatalf("MutateObject(%s): %v", createPhysical, err)
			}
			if onHost.Labels["vcluster.example.com/tenant"] != "team-a" || onHost.Annotations[undoAnnotation] == "" {
				t.Fatalf("on the host: labels %v, annotations %v; want the tenant label and %s", onHost.Labels, onHost.Annotations, undoAnnotation)
			}
			if tc.onHost != nil {
				tc.onHost(onHost)
			}
			read := onHost.DeepCopy()
			if err := m.MutateObject(t.Context(), read, getPhysical, scheme.Scheme); err != nil {
				t.Fatalf("MutateObject(%s): %v", getPhysical, err)
			}
			if !equality.Semantic.DeepEqual(nilEmptyMeta(read), nilEmptyMeta(tc.sent.DeepCopy())) {
				t.Errorf("read back\n%s\nwant what the syncer sent\n%s", mustJSON(t, read), mustJSON(t, tc.sent))
			}
		})
	}
}

// nilEmptyMeta sets empty label and annotation maps to nil.
func nilEmptyMeta[T client.Object](obj T) T {
	if len(obj.GetLabels()) == 0 {
		obj.SetLabels(nil)
	}
	if len(obj.GetAnnotations()) == 0 {
		obj.SetAnnotations(nil)
	}
	return obj
}

// freePorts returns n distinct free TCP ports on 127.0.0.1, held until all are chosen.
// vcluster's v1 manager calls osutil.Exit(1) (the whole test binary) when its gRPC server fails,
// so its port must be free.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("free port: %v", err)
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// environWithout returns os.Environ() without the variables whose names start with one of
// prefixes.
func environWithout(prefixes ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				drop = true
				break
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

// syncBuffer is a bytes.Buffer safe for a process's output copier and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startSDKV1Plugin starts the sdkpluginv1 binary as a process that registers under name with a
// v1 manager started on a free port, and returns the manager and the process, which gets
// SIGTERM when tb ends.
func startSDKV1Plugin(tb testing.TB, name string) (*v1.Manager, *exec.Cmd) {
	tb.Helper()
	bin := binary(tb, binSDKV1)
	managerAddr := fmt.Sprintf("127.0.0.1:%d", freePorts(tb, 1)[0])
	cmd := exec.Command(bin, "-vcluster-address", managerAddr, "-name", name)
	stderr := &syncBuffer{}
	exited := startSidecar(tb, cmd, name, stderr)
	return startV1Manager(tb, managerAddr, []string{name}, exited, stderr), cmd
}

// TestV1Throughput compares synchook's plugin v1 bridge with an sdk-style v1 plugin
// (internal/sdkpluginv1), each a separate process registered with its own vcluster plugin v1
// manager, which opens a new gRPC connection per call, interleaved in short slices; it logs
// ops/s and the ratio synchook/sdk with one caller and with benchCallers callers, and the CPU
// time per call of each plugin process (vcluster's side, this process, is not counted). It
// never asserts timings. Linux only (/proc).
//
//	SYNCHOOK_BENCH=1 [SYNCHOOK_BENCH_SECONDS=6] go test -run TestV1Throughput -v
func TestV1Throughput(t *testing.T) {
	if os.Getenv("SYNCHOOK_BENCH") != "1" {
		t.Skip("set SYNCHOOK_BENCH=1 to measure throughput")
	}
	perPlugin := 6 * time.Second
	if s := os.Getenv("SYNCHOOK_BENCH_SECONDS"); s != "" {
		var f float64
		if _, err := fmt.Sscan(s, &f); err != nil || f <= 0 {
			t.Fatalf("SYNCHOOK_BENCH_SECONDS=%q: want a positive number", s)
		}
		perPlugin = time.Duration(f * float64(time.Second))
	}
	const slice = 250 * time.Millisecond

	ctx := t.Context()
	pod := benchPod()
	shk := startV1Synchook(t, synchookConfig)
	sdkManager, sdk := startSDKV1Plugin(t, "sdk-style")
	plugins := []struct {
		name string
		m    *v1.Manager
		pid  int // the plugin's process
	}{
		{"synchook", shk.m, shk.cmd.Process.Pid},
		{"sdk-style", sdkManager, sdk.Process.Pid},
	}
	for _, p := range plugins {
		got := pod.DeepCopy()
		if err := p.m.MutateObject(ctx, got, createPhysical, scheme.Scheme); err != nil {
			t.Fatalf("%s: MutateObject: %v", p.name, err)
		}
		if got.Labels["vcluster.example.com/tenant"] != "team-a" {
			t.Fatalf("%s: tenant label not set: %v", p.name, got.Labels)
		}
	}
	t.Logf("pod: %d bytes of JSON; %s per plugin and mode in %s slices", len(mustJSON(t, pod)), perPlugin, slice)

	var report strings.Builder
	for _, callers := range []int{1, benchCallers} {
		ops := make([]int64, len(plugins))
		elapsed := make([]time.Duration, len(plugins))
		cpu := make([]time.Duration, len(plugins)) // the plugin process
		// warm up both plugins untimed
		for _, p := range plugins {
			if _, _, err := runSlice(ctx, p.m, pod, callers, slice); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
		}
		rounds := max(1, int(perPlugin/slice))
		for r := range rounds {
			for k := range plugins {
				i := (r + k) % len(plugins) // rotate who goes first
				before := processCPU(t, plugins[i].pid)
				n, d, err := runSlice(ctx, plugins[i].m, pod, callers, slice)
				if err != nil {
					t.Fatalf("%s: %v", plugins[i].name, err)
				}
				cpu[i] += processCPU(t, plugins[i].pid) - before
				ops[i] += n
				elapsed[i] += d
			}
		}
		rate := func(i int) float64 { return float64(ops[i]) / elapsed[i].Seconds() }
		fmt.Fprintf(&report, "\n%2d caller(s): synchook %8.0f ops/s   sdk-style %8.0f ops/s   synchook/sdk %.2f   synchook CPU per call %6.1f µs (%d calls)   sdk-style CPU per call %6.1f µs (%d calls)",
			callers, rate(0), rate(1), rate(0)/rate(1), perCall(cpu[0], ops[0]), ops[0], perCall(cpu[1], ops[1]), ops[1])
	}
	t.Log(report.String())
}
