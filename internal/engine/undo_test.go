package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/webhook"
)

// optOut is a hook whose change the tenant should see (hooks.Undoer).
type optOut struct{ hooks.FuncHook }

func (optOut) Undo() bool { return false }

func TestUndoIsRegisteredOnTheReadTypeAndCanBeRefusedOrOptedOutOf(t *testing.T) {
	label := func(_ context.Context, o client.Object) (client.Object, error) {
		o.SetLabels(map[string]string{"tenant": strings.Repeat("a", 63)})
		return o, nil
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true, MaxUndoBytes: 80})
	reg.MustRegister(
		hooks.NewFunc("label", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, label),
		optOut{hooks.NewFunc("visible", &corev1.Service{}, []hooks.HookType{hooks.CreatePhysical}, label)},
	)
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	t.Run("GetPhysical is served for the kind with no Get hook, and announced", func(t *testing.T) {
		if !reg.Has(podGVK, hooks.GetPhysical) || reg.Has(podGVK, hooks.GetVirtual) {
			t.Error("Has(Pod, GetPhysical) must be true, Has(Pod, GetVirtual) false")
		}
		found := false
		for _, rc := range reg.Capabilities().Resources {
			for _, ht := range rc.HookTypes {
				if rc.Kind == "Pod" && ht.Type == hooks.GetPhysical && slices.Contains(ht.Hooks, undo.Annotation) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("capabilities %+v do not list the undo on Pod GetPhysical", reg.Capabilities())
		}
	})
	t.Run("a hook that opted out records no undo and gets no read type", func(t *testing.T) {
		if reg.Has(corev1.SchemeGroupVersion.WithKind("Service"), hooks.GetPhysical) {
			t.Error("Service GetPhysical is registered for a hook with Undo() false")
		}
		res, err := reg.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Service"), hooks.CreatePhysical, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}`))
		if err != nil || strings.Contains(string(res.Patch), "undo") {
			t.Errorf("patch %s, %v", res.Patch, err)
		}
	})
	t.Run("an undo over the size limit refuses the change, naming the hook", func(t *testing.T) {
		_, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
		if !errors.Is(err, undo.ErrTooLarge) || !strings.Contains(err.Error(), `"label"`) || webhook.StatusCode(err) != 422 {
			t.Errorf("error %v (status %d), want undo.ErrTooLarge naming the hook, 422", err, webhook.StatusCode(err))
		}
	})
}

func TestCheckIdempotentNamesTheHookAndThePathThatKeptChanging(t *testing.T) {
	appendToleration := func(_ context.Context, o client.Object) (client.Object, error) {
		p := o.(*corev1.Pod)
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpExists})
		return p, nil
	}
	setLabel := func(_ context.Context, o client.Object) (client.Object, error) {
		o.SetLabels(map[string]string{"tenant": "a"})
		return o, nil
	}
	samples := func(schema.GroupVersionKind) [][]byte {
		return [][]byte{[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`)}
	}
	good := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true})
	good.MustRegister(hooks.NewFunc("label", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, setLabel))
	if err := good.CheckIdempotent(t.Context(), samples); err != nil {
		t.Errorf("a label hook (with its undo): %v", err)
	}
	bad := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true})
	bad.MustRegister(hooks.NewFunc("append-toleration", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical}, appendToleration))
	err := bad.CheckIdempotent(t.Context(), samples)
	var ne *engine.NotIdempotentError
	if !errors.As(err, &ne) || ne.Hooks != "append-toleration" || ne.Path != "/spec/tolerations/1" {
		t.Errorf("error %v, want NotIdempotentError naming append-toleration at /spec/tolerations/1", err)
	}
}

func TestCheckIdempotentNamesTheCulpritAmongTheChainsHooks(t *testing.T) {
	appendToleration := hooks.NewFunc("append-toleration", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		p := o.(*corev1.Pod)
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpExists})
		return p, nil
	})
	setLabel := hooks.NewFunc("label", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		o.SetLabels(map[string]string{"tenant": "a"})
		return o, nil
	})
	samples := func(schema.GroupVersionKind) [][]byte {
		return [][]byte{[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`)}
	}
	for _, tc := range []struct {
		name  string
		chain []hooks.ClientHook
	}{
		{"the culprit runs last", []hooks.ClientHook{setLabel, appendToleration}},
		{"the culprit runs first", []hooks.ClientHook{appendToleration, setLabel}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true})
			reg.MustRegister(tc.chain...)
			var ne *engine.NotIdempotentError
			if err := reg.CheckIdempotent(t.Context(), samples); !errors.As(err, &ne) || ne.Hooks != "append-toleration" {
				t.Errorf("error %v, want NotIdempotentError naming append-toleration alone", err)
			}
		})
	}
}

// Regression (issue 20): a chain with a hook that opted out of undo used to run the whole
// chain and then the opted-out hooks again, twice per request. (Since issue 50 every hook of
// such a chain opts out: a chain that mixes them is refused, TestHooksOfOneChainMustAgreeOnUndo.)
func TestAChainWithAnOptedOutHookRunsEachHookOnceAndRecordsNoUndo(t *testing.T) {
	var calls atomic.Int32
	count := func(_ context.Context, o client.Object) (client.Object, error) {
		calls.Add(1)
		o.SetLabels(map[string]string{"visible": "yes"})
		return o, nil
	}
	label := func(_ context.Context, o client.Object) (client.Object, error) {
		l := o.GetLabels()
		l["hidden"] = "yes"
		o.SetLabels(l)
		return o, nil
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true})
	reg.MustRegister(
		optOut{hooks.NewFunc("visible", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, count)},
		optOut{hooks.NewFunc("hidden", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, label)},
	)
	res, err := reg.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Pod"), hooks.CreatePhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the opted-out hook ran %d times for one request, want 1", n)
	}
	if strings.Contains(string(res.Patch), "undo") {
		t.Errorf("patch %s records an undo for a chain with an opted-out hook (undo is per chain)", res.Patch)
	}
}

// Undo is per chain: a hook whose Undo() is false beside one that records its undo would leave
// the other's change in the read (an image mirror's images given to the syncer), so Register
// refuses the second, naming both; other kinds, and read and delete chains, may differ.
func TestHooksOfOneChainMustAgreeOnUndo(t *testing.T) {
	keep := func(_ context.Context, o client.Object) (client.Object, error) { return o, nil }
	pod := func(name string, types ...hooks.HookType) hooks.FuncHook {
		return hooks.NewFunc(name, &corev1.Pod{}, types, keep)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true})
	reg.MustRegister(optOut{pod("visible", hooks.CreatePhysical, hooks.GetPhysical)})
	err := reg.Register(pod("mirror", hooks.CreatePhysical))
	if !errors.Is(err, engine.ErrUndoDisagrees) || !strings.Contains(err.Error(), `"mirror"`) || !strings.Contains(err.Error(), `"visible"`) || !strings.Contains(err.Error(), "CreatePhysical") {
		t.Errorf("a mixed chain: error %v, want ErrUndoDisagrees naming both hooks and the hook type", err)
	}
	if err := reg.Register(pod("reader", hooks.GetPhysical)); err != nil {
		t.Errorf("a read chain may mix: %v", err)
	}
	if err := reg.Register(pod("updater", hooks.UpdatePhysical)); err != nil {
		t.Errorf("another hook type may differ: %v", err)
	}
	if err := reg.Register(hooks.NewFunc("svc", &corev1.Service{}, []hooks.HookType{hooks.CreatePhysical}, keep)); err != nil {
		t.Errorf("another kind may differ: %v", err)
	}
}
