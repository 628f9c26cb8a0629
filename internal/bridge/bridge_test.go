package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/vclusterstub"
	"github.com/synchook/synchook/patch"
)

func podFunc(name string, typ hooks.HookType, fn func(context.Context, *corev1.Pod) error) hooks.FuncHook {
	return hooks.Typed(name, []hooks.HookType{typ}, fn)
}

// testRegistry has one hook per outcome, each on its own hook type of v1 Pod.
func testRegistry(t *testing.T) *engine.Registry {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		podFunc("tenant-label", hooks.CreatePhysical, func(_ context.Context, p *corev1.Pod) error {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels["tenant"] = "a"
			delete(p.Labels, "host-only")
			return nil
		}),
		podFunc("refuse", hooks.UpdatePhysical, func(context.Context, *corev1.Pod) error {
			return errors.New("pods may not be updated")
		}),
		podFunc("rename", hooks.DeletePhysical, func(_ context.Context, p *corev1.Pod) error {
			p.Name = "other"
			return nil
		}),
		podFunc("explode", hooks.GetPhysical, func(context.Context, *corev1.Pod) error {
			panic("boom")
		}),
		podFunc("stuck", hooks.CreateVirtual, func(context.Context, *corev1.Pod) error {
			<-release
			return nil
		}),
		podFunc("not-found", hooks.UpdateVirtual, func(_ context.Context, p *corev1.Pod) error {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "settings")
		}),
	)
	return reg
}

// startBridge runs a Bridge for reg on a free loopback port against a new vcluster stand-in
// and waits for its registration.
func startBridge(t *testing.T, reg *engine.Registry, opts bridge.Options) (*vclusterstub.Server, *remote.RegisterPluginRequest) {
	t.Helper()
	vc := vclusterstub.Start(t, "127.0.0.1:0")
	opts.Address = "localhost:0"
	opts.VClusterAddress = vc.Addr()
	runBridge(t, reg, opts)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang
	defer cancel()
	p, err := vc.WaitForPlugin(ctx, bridge.DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	return vc, p
}

// runBridge runs a Bridge until the test ends and checks that it then returns nil promptly.
func runBridge(t testing.TB, reg *engine.Registry, opts bridge.Options) {
	t.Helper()
	b, err := bridge.New(engine.NewRunner(reg, engine.RunnerOptions{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
			t.Errorf("Run did not return after its context ended")
		}
	})
}

func podJSON(t *testing.T, labels map[string]string) string {
	t.Helper()
	// As vcluster sends it: json.Marshal of its typed object, TypeMeta empty.
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.Labels = "web", "tenant", labels
	pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "nginx"}}
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMutateOverGRPC(t *testing.T) {
	// Two bridges: the stuck hook's case needs its request timeout to pass, while the hook runs
	// (the hook never returns, so the timeout is what the case takes), and gets 2 s: the decode
	// before the hook, a few milliseconds, fits in it on a loaded machine under the race
	// detector, so the deadline names the stuck hook. Every other case gets a timeout that an
	// answer meets however loaded the machine, so that a slow answer is never a deadline.
	reg := testRegistry(t)
	_, p := startBridge(t, reg, bridge.Options{RequestTimeout: time.Minute})
	_, short := startBridge(t, reg, bridge.Options{RequestTimeout: 2 * time.Second})
	pod := podJSON(t, map[string]string{"app": "web", "host-only": "x"})
	cases := []struct {
		name       string
		req        *remote.MutateRequest
		code       codes.Code
		mutated    bool
		wantInText string
	}{
		{"a hooked pod comes back whole with the label", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: pod}, codes.OK, true, `"tenant":"a"`},
		{"a pod the hooks do not change is unchanged", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: podJSON(t, map[string]string{"tenant": "a"})}, codes.OK, false, ""},
		{"a kind without hooks is unchanged", &remote.MutateRequest{ApiVersion: "v1", Kind: "ConfigMap", Type: "CreatePhysical", Object: `{"metadata":{"name":"c"}}`}, codes.OK, false, ""},
		{"a hook type without hooks for the kind is unchanged", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "DeleteVirtual", Object: pod}, codes.OK, false, ""},
		{"a hook type this project does not implement is unchanged", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "ApplyPhysical", Object: pod}, codes.OK, false, ""},
		{"a hook's refusal is PermissionDenied and names the hook", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "UpdatePhysical", Object: pod}, codes.PermissionDenied, false, `hook "refuse" UpdatePhysical Pod: pods may not be updated`},
		{"a renamed object is FailedPrecondition and names the hook", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "DeletePhysical", Object: pod}, codes.FailedPrecondition, false, `hook "rename" may not change /metadata/name`},
		{"a panicking hook is Internal and names the hook", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "GetPhysical", Object: pod}, codes.Internal, false, `hook "explode" GetPhysical Pod: panic: boom`},
		{"a hook past the deadline is DeadlineExceeded and names the hook", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreateVirtual", Object: pod}, codes.DeadlineExceeded, false, `hook "stuck" CreateVirtual Pod`},
		{"a hook's Kubernetes NotFound is NotFound", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "UpdateVirtual", Object: pod}, codes.NotFound, false, `hook "not-found"`},
		{"a malformed object is InvalidArgument", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: `{"metadata":`}, codes.InvalidArgument, false, "decode Pod object"},
		{"an object of the wrong shape is InvalidArgument", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: `{"metadata":{"labels":"x"}}`}, codes.InvalidArgument, false, "decode Pod object"},
		{"an apiVersion that is no group/version is InvalidArgument", &remote.MutateRequest{ApiVersion: "a/b/c", Kind: "Pod", Type: "CreatePhysical", Object: pod}, codes.InvalidArgument, false, `apiVersion "a/b/c"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := p.GetAddress()
			if tc.code == codes.DeadlineExceeded {
				addr = short.GetAddress()
			}
			res, err := vclusterstub.Mutate(t.Context(), addr, tc.req)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code = %s (%v), want %s", got, err, tc.code)
			}
			if err != nil {
				if !strings.Contains(status.Convert(err).Message(), tc.wantInText) {
					t.Errorf("message %q lacks %q", status.Convert(err).Message(), tc.wantInText)
				}
				return
			}
			if res.GetMutated() != tc.mutated {
				t.Fatalf("mutated = %v, want %v", res.GetMutated(), tc.mutated)
			}
			if !tc.mutated && res.GetObject() != "" {
				t.Errorf("unchanged answer carries an object: %s", res.GetObject())
			}
			if !strings.Contains(res.GetObject(), tc.wantInText) {
				t.Errorf("object %s lacks %s", res.GetObject(), tc.wantInText)
			}
		})
	}
}

func TestMutateAsVClusterDoesRemovesTheLabel(t *testing.T) {
	vc, _ := startBridge(t, testRegistry(t), bridge.Options{})
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = "web", "tenant"
	pod.Labels = map[string]string{"app": "web", "host-only": "x"}
	n, err := vc.MutateObject(t.Context(), pod, "CreatePhysical")
	if err != nil || n != 1 {
		t.Fatalf("MutateObject = %d, %v; want 1 plugin called", n, err)
	}
	if want := map[string]string{"app": "web", "tenant": "a"}; fmt.Sprint(pod.Labels) != fmt.Sprint(want) {
		t.Errorf("labels = %v, want %v", pod.Labels, want)
	}
}

func TestRegistration(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		podFunc("a", hooks.CreatePhysical, func(context.Context, *corev1.Pod) error { return nil }),
		podFunc("b", hooks.GetVirtual, func(context.Context, *corev1.Pod) error { return nil }),
		hooks.NewFunc("svc", &corev1.Service{}, []hooks.HookType{hooks.UpdatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) { return o, nil }),
	)

	t.Run("the plugin registers its name, version v1, an IP address and its hooks", func(t *testing.T) {
		_, p := startBridge(t, reg, bridge.Options{})
		if p.GetName() != "synchook" || p.GetVersion() != "v1" {
			t.Errorf("name %q version %q", p.GetName(), p.GetVersion())
		}
		host, _, err := net.SplitHostPort(p.GetAddress())
		if err != nil || host != "127.0.0.1" {
			t.Errorf("address %q, want 127.0.0.1:port", p.GetAddress())
		}
		var got []string
		for _, h := range p.GetClientHooks() {
			got = append(got, fmt.Sprintf("%s/%s=%s", h.GetApiVersion(), h.GetKind(), strings.Join(h.GetTypes(), ",")))
		}
		if want := "v1/Pod=CreatePhysical,GetVirtual v1/Service=UpdatePhysical"; strings.Join(got, " ") != want {
			t.Errorf("client hooks %v, want %s", got, want)
		}
	})

	t.Run("a plugin with no hooks still registers, so that vcluster does not wait for it", func(t *testing.T) {
		_, p := startBridge(t, engine.NewRegistry(nil), bridge.Options{})
		if len(p.GetClientHooks()) != 0 {
			t.Errorf("client hooks %v", p.GetClientHooks())
		}
	})

	t.Run("a vcluster that starts after the plugin gets the registration", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		var logs testenv.LogSink
		runBridge(t, reg, bridge.Options{Address: "127.0.0.1:0", Name: "late", VClusterAddress: addr, MaxBackoff: 200 * time.Millisecond, Log: logs.Logger()})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang
		defer cancel()
		// A few failed attempts first: the second one is logged as "still not reachable".
		if _, err := logs.WaitFor(ctx, "vcluster plugin server still not reachable"); err != nil {
			t.Fatalf("%v; log:\n%s", err, logs.String())
		}
		vc := vclusterstub.Start(t, addr)
		if _, err := vc.WaitForPlugin(ctx, "late"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a restarted vcluster with a new run ID gets registered with again", func(t *testing.T) {
		vc := vclusterstub.Start(t, "127.0.0.1:0")
		runBridge(t, reg, bridge.Options{Address: "127.0.0.1:0", Name: "again", VClusterAddress: vc.Addr(), PollInterval: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang
		defer cancel()
		if _, err := vc.WaitForPlugin(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		// Three more polls with the same run ID do not register again.
		if err := vc.WaitForPolls(ctx, vc.Polls()+3); err != nil {
			t.Fatal(err)
		}
		if n := vc.Registrations(); n != 1 {
			t.Errorf("%d registrations with one run, want 1", n)
		}
		oldRun := vc.RunID()
		vc.Restart(t)
		if vc.RunID() == oldRun {
			t.Fatal("the restarted stand-in kept its run ID")
		}
		if _, err := vc.WaitForPlugin(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		if n := vc.Registrations(); n != 2 {
			t.Errorf("%d registrations after one restart, want 2", n)
		}
	})
}

func TestNewRejectsBadAddresses(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts bridge.Options
		want string
	}{
		{"no plugin address", bridge.Options{}, "Address is required"},
		{"a plugin address without a port", bridge.Options{Address: "localhost"}, `plugin address "localhost"`},
		{"a plugin port out of range", bridge.Options{Address: "localhost:70000"}, "port must be 0-65535"},
		{"a vcluster address without a port", bridge.Options{Address: ":14000", VClusterAddress: "vcluster"}, `vcluster address "vcluster"`},
	} {
		t.Run(tc.name+" is an error", func(t *testing.T) {
			_, err := bridge.New(engine.NewRunner(engine.NewRegistry(nil), engine.RunnerOptions{}), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRunFailsOnABusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := bridge.New(engine.NewRunner(engine.NewRegistry(nil), engine.RunnerOptions{}), bridge.Options{Address: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "vcluster plugin listener") {
		t.Errorf("Run = %v, want a listener error", err)
	}
}

func TestStatusCode(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	hookErr := func(err error) error {
		return &failure.HookError{Hook: "h", Type: hooks.CreatePhysical, GVK: gvk, Err: err}
	}
	cases := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"no error is OK", nil, codes.OK},
		{"a decode error is InvalidArgument", &failure.DecodeError{GVK: gvk, Err: errors.New("bad")}, codes.InvalidArgument},
		{"a refusal is PermissionDenied", hookErr(errors.New("no")), codes.PermissionDenied},
		{"a protected field is FailedPrecondition", hookErr(&patch.ForbiddenPathError{Path: "/kind", Field: "/kind"}), codes.FailedPrecondition},
		{"a panic is Internal", hookErr(&failure.PanicError{Value: "x"}), codes.Internal},
		{"a deadline is DeadlineExceeded", hookErr(context.DeadlineExceeded), codes.DeadlineExceeded},
		{"a cancelled caller is Canceled", hookErr(context.Canceled), codes.Canceled},
		{"a Kubernetes Conflict is Aborted", hookErr(apierrors.NewConflict(schema.GroupResource{}, "x", errors.New("c"))), codes.Aborted},
		{"a Kubernetes TooManyRequests is ResourceExhausted", hookErr(apierrors.NewTooManyRequests("slow down", 1)), codes.ResourceExhausted},
		{"a Kubernetes ServiceUnavailable is Unavailable", hookErr(apierrors.NewServiceUnavailable("later")), codes.Unavailable},
		{"too many running chains is ResourceExhausted", fmt.Errorf("v1 Pod CreatePhysical: %w", failure.ErrOverloaded), codes.ResourceExhausted},
		{"an error that is not a hook's is Internal", errors.New("encode"), codes.Internal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := bridge.StatusCode(tc.err); got != tc.want {
				t.Errorf("StatusCode = %s, want %s", got, tc.want)
			}
		})
	}
}

// BenchmarkMutateNewConnectionPerCall measures one Mutate call made as vcluster makes it: a new
// gRPC connection, the call, closing the connection; the chain adds one label to a pod.
func BenchmarkMutateNewConnectionPerCall(b *testing.B) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(podFunc("label", hooks.CreatePhysical, func(_ context.Context, p *corev1.Pod) error {
		p.Labels = map[string]string{"tenant": "a"}
		return nil
	}))
	vc := vclusterstub.Start(b, "127.0.0.1:0")
	runBridge(b, reg, bridge.Options{Address: "127.0.0.1:0", VClusterAddress: vc.Addr()})
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute) // a guard against a hang
	defer cancel()
	p, err := vc.WaitForPlugin(ctx, bridge.DefaultName)
	if err != nil {
		b.Fatal(err)
	}
	obj, _ := json.Marshal(examplePod())
	for _, bc := range []struct {
		name    string
		req     *remote.MutateRequest
		mutated bool
	}{
		{"a pod that gets a label", &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: string(obj)}, true},
		{"a kind without hooks", &remote.MutateRequest{ApiVersion: "v1", Kind: "ConfigMap", Type: "CreatePhysical", Object: `{"metadata":{"name":"c"}}`}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := vclusterstub.Mutate(b.Context(), p.GetAddress(), bc.req)
				if err != nil || res.GetMutated() != bc.mutated {
					b.Fatalf("Mutate = %v, %v", res, err)
				}
			}
		})
	}
}
