package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/patch"
	"github.com/synchook/synchook/webhook"
)

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// allEight implements every one of the eight interfaces and records which was called.
type allEight struct{ called *[]hooks.HookType }

func (allEight) Name() string            { return "all-eight" }
func (allEight) Resource() client.Object { return &corev1.Pod{} }
func (h allEight) rec(t hooks.HookType, o client.Object) (client.Object, error) {
	*h.called = append(*h.called, t)
	return o, nil
}

func (h allEight) MutateCreatePhysical(_ context.Context, o client.Object) (client.Object, error) {
	return h.rec(hooks.CreatePhysical, o)
}

func (h allEight) MutateUpdatePhysical(_ context.Context, o client.Object) (client.Object, error) {
	return h.rec(hooks.UpdatePhysical, o)
}

func (h allEight) MutateDeletePhysical(_ context.Context, o client.Object) (client.Object, error) {
	return h.rec(hooks.DeletePhysical, o)
}

func (h allEight) MutateGetPhysical(_ context.Context, o client.Object) (client.Object, error) {
	return h.rec(hooks.GetPhysical, o)
}

func (h allEight) MutateCreateVirtual(_ context.Context, o client.Object) (client.Object, error) {
	return h.rec(hooks.CreateVirtual, o)
}

func (h allEight) MutateUpdateVirtual(_ context.Context, o client.Object) (client.Object, error) {
	return h.rec(hooks.UpdateVirtual, o)
}

func (h allEight) MutateDeleteVirtual(_ context.Context, o client.Object) (client.Object, error) {
	return h.rec(hooks.DeleteVirtual, o)
}

func (h allEight) MutateGetVirtual(_ context.Context, o client.Object) (client.Object, error) {
	return h.rec(hooks.GetVirtual, o)
}

// labelHook implements only MutateCreatePhysical.
type labelHook struct{ name, key, value string }

func (h labelHook) Name() string          { return h.name }
func (labelHook) Resource() client.Object { return &corev1.Pod{} }
func (h labelHook) MutateCreatePhysical(_ context.Context, o client.Object) (client.Object, error) {
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[h.key] = h.value
	o.SetLabels(l)
	return o, nil
}

// funcHook is a hooks.FuncHook built from one function, for tests.
type funcHook struct {
	name string
	obj  client.Object
	fns  map[hooks.HookType]hooks.MutateFunc
}

func (h funcHook) Name() string                                     { return h.name }
func (h funcHook) Resource() client.Object                          { return h.obj }
func (h funcHook) MutateFuncs() map[hooks.HookType]hooks.MutateFunc { return h.fns }

func podHook(name string, fn hooks.MutateFunc) funcHook {
	return funcHook{name: name, obj: &corev1.Pod{}, fns: map[hooks.HookType]hooks.MutateFunc{hooks.CreatePhysical: fn}}
}

func TestParseHookType(t *testing.T) {
	for _, typ := range hooks.AllHookTypes() {
		got, err := hooks.ParseHookType(string(typ))
		if err != nil || got != typ {
			t.Errorf("ParseHookType(%q) = %q, %v", typ, got, err)
		}
	}
	for _, bad := range []string{"", "createPhysical", "ApplyPhysical", "CreatePhysical "} {
		_, err := hooks.ParseHookType(bad)
		if !errors.Is(err, hooks.ErrUnknownHookType) {
			t.Fatalf("ParseHookType(%q) error = %v, want ErrUnknownHookType", bad, err)
		}
		if !strings.Contains(err.Error(), "CreatePhysical, UpdatePhysical, DeletePhysical, GetPhysical, CreateVirtual, UpdateVirtual, DeleteVirtual, GetVirtual") {
			t.Errorf("error %q does not list the valid hook types", err)
		}
	}
}

func TestRegistryFindsEveryInterfaceFromOneTable(t *testing.T) {
	var called []hooks.HookType
	reg := engine.NewRegistry(nil)
	if err := reg.Register(allEight{called: &called}); err != nil {
		t.Fatal(err)
	}
	keys := reg.Keys()
	if len(keys) != 8 {
		t.Fatalf("Keys() = %v, want 8 keys", keys)
	}
	for i, typ := range hooks.AllHookTypes() {
		if keys[i] != (engine.Key{GVK: podGVK, Type: typ}) {
			t.Errorf("Keys()[%d] = %v, want v1 Pod %s", i, keys[i], typ)
		}
		if _, err := reg.Mutate(t.Context(), podGVK, typ, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)); err != nil {
			t.Fatal(err)
		}
		if called[i] != typ {
			t.Errorf("running %s called the hook's %s method", typ, called[i])
		}
	}
}

func TestRegistryRejects(t *testing.T) {
	cases := []struct {
		name string
		hook hooks.ClientHook
		want string
	}{
		{"a duplicate name", labelHook{name: "dup"}, "already registered"},
		{"an empty name", labelHook{}, "empty name"},
		{"a hook with no Mutate method", funcHook{name: "none", obj: &corev1.Pod{}}, "implements none"},
		{"a typed resource the scheme does not know", funcHook{name: "alien", obj: &alien{}, fns: map[hooks.HookType]hooks.MutateFunc{hooks.GetVirtual: nil}}, "resolve GVK"},
		{"an unstructured resource without kind", funcHook{name: "nokind", obj: &unstructured.Unstructured{}}, "without apiVersion and kind"},
		{"an unknown hook type from MutateFuncs", funcHook{name: "bad", obj: &corev1.Pod{}, fns: map[hooks.HookType]hooks.MutateFunc{"ApplyPhysical": nil}}, "unknown hook type \"ApplyPhysical\""},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is an error", func(t *testing.T) {
			reg := engine.NewRegistry(nil)
			reg.MustRegister(labelHook{name: "dup"})
			err := reg.Register(tc.hook)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Register error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

type alien struct{ corev1.Pod }

func TestRunChainsHooksInRegistrationOrder(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(labelHook{"first", "order", "first"}, labelHook{"second", "order", "second"}, labelHook{"third", "extra", "x"})
	res, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(mustObject(t, res), &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels["order"] != "second" || pod.Labels["extra"] != "x" {
		t.Errorf("labels = %v, want order=second (the later hook wins) and extra=x", pod.Labels)
	}
	if res.Hooks != 3 || res.Operations != 1 {
		t.Errorf("Hooks = %d, Operations = %d, want 3 and 1", res.Hooks, res.Operations)
	}
	caps := reg.Capabilities()
	if len(caps.Resources) != 1 || strings.Join(caps.Resources[0].HookTypes[0].Hooks, ",") != "first,second,third" {
		t.Errorf("Capabilities() = %+v", caps)
	}
}

func TestRunWithNothingToDo(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(podHook("noop", func(_ context.Context, o client.Object) (client.Object, error) { return o, nil }))
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	for _, tc := range []struct {
		name string
		typ  hooks.HookType
	}{{"a hook type with no hooks gives no patch", hooks.UpdatePhysical}, {"a hook that changes nothing gives no patch", hooks.CreatePhysical}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := reg.Mutate(t.Context(), podGVK, tc.typ, raw)
			if err != nil {
				t.Fatal(err)
			}
			if obj, _ := res.Object(); res.Patch != nil || res.Operations != 0 || string(obj) != string(raw) {
				t.Errorf("Result = %+v, want no patch and the request object", res)
			}
		})
	}
}

func TestRunKeepsFieldsTheTypesDoNotKnow(t *testing.T) {
	// spec.futureField and metadata.futureMeta are not in k8s.io/api: a newer Kubernetes or
	// a CRD field. The patch must only add the label (kueue#2878, controller-runtime#2982).
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","futureMeta":{"a":1},"labels":{"x":"y"}},` +
		`"spec":{"futureField":"keep","containers":[{"name":"c","image":"i","futureContainerField":true}]}}`)
	reg := engine.NewRegistry(nil)
	reg.MustRegister(labelHook{"l", "added", "yes"})
	res, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, raw)
	if err != nil {
		t.Fatal(err)
	}
	var ops []patch.Operation
	if err := json.Unmarshal(res.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Operation != "add" || ops[0].Path != "/metadata/labels/added" {
		t.Fatalf("patch = %s, want one add of /metadata/labels/added", res.Patch)
	}
	for _, want := range []string{`"futureField":"keep"`, `"futureMeta":{"a":1}`, `"futureContainerField":true`} {
		if !strings.Contains(string(mustObject(t, res)), want) {
			t.Errorf("patched object lost %s", want)
		}
	}
}

// TestRunDiffsLabelChangesAgainstTheRequest: a hook that only changes labels or annotations is
// diffed against the request's own bytes; differences of form between the request and the
// typed round trip (escapes, a map written as null or {}) are never turned into operations.
func TestRunDiffsLabelChangesAgainstTheRequest(t *testing.T) {
	const head = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":null,`
	const tail = `},"spec":{"containers":null},"status":{}}`
	setLabel := func(key, value string) hooks.MutateFunc {
		return func(_ context.Context, o client.Object) (client.Object, error) {
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			if value == "" {
				delete(l, key)
			} else {
				l[key] = value
			}
			o.SetLabels(l)
			return o, nil
		}
	}
	cases := []struct {
		name, metadata string
		hook           hooks.MutateFunc
		want           string
	}{
		{"an escaped label is left as written", `"labels":{"a":"\u0031"}`, setLabel("x", "y"), `[{"op":"add","path":"/metadata/labels/x","value":"y"}]`},
		{"labels written as null", `"labels":null`, setLabel("x", "y"), `[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]`},
		{"labels written as {} and left alone", `"labels":{},"annotations":{"k":"v"}`, setLabel("x", ""), `null`},
		{"a removed label", `"labels":{"a":"1","b":"2"}`, setLabel("a", ""), `[{"op":"remove","path":"/metadata/labels/a"}]`},
		{"a label set to the value it has", `"labels":{"a":"\u0031"}`, setLabel("a", "1"), `null`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := engine.NewRegistry(nil)
			reg.MustRegister(podHook("labels", tc.hook))
			raw := []byte(head + tc.metadata + tail)
			res, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, raw)
			if err != nil {
				t.Fatal(err)
			}
			got := "null" // no patch
			if res.Patch != nil {
				got = string(res.Patch)
			}
			if got != tc.want {
				t.Errorf("patch = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRunMovesThePatchOntoARequestThatLacksParents(t *testing.T) {
	// The typed round trip has "status":{} but the request has no status at all.
	reg := engine.NewRegistry(nil)
	reg.MustRegister(podHook("phase", func(_ context.Context, o client.Object) (client.Object, error) {
		o.(*corev1.Pod).Status.Phase = corev1.PodRunning
		return o, nil
	}))
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"unknown":1}`)
	res, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, raw)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := patch.Apply(raw, res.Patch)
	if err != nil {
		t.Fatalf("patch %s does not apply to the request: %v", res.Patch, err)
	}
	if !strings.Contains(string(applied), `"phase":"Running"`) || !strings.Contains(string(applied), `"unknown":1`) {
		t.Errorf("applied = %s", applied)
	}
}

func TestRunReportsHookFailures(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"}}`)
	cases := []struct {
		name   string
		fn     hooks.MutateFunc
		want   string
		code   int32
		target error
	}{
		{"an error comes back with hook name and type", func(context.Context, client.Object) (client.Object, error) {
			return nil, errors.New("no thanks")
		}, `hook "bad" CreatePhysical Pod: no thanks`, 403, nil},
		{"a panic becomes an error", func(context.Context, client.Object) (client.Object, error) {
			panic("boom")
		}, `hook "bad" CreatePhysical Pod: panic: boom`, 500, nil},
		{"a different kind is an error", func(context.Context, client.Object) (client.Object, error) {
			return &corev1.Service{}, nil
		}, "different kind of object: got *v1.Service", 500, failure.ErrWrongKind},
		{"a nil object is an error", func(context.Context, client.Object) (client.Object, error) {
			return nil, nil
		}, "returned nil", 500, failure.ErrWrongKind},
		{"a renamed object is rejected by the guard", func(_ context.Context, o client.Object) (client.Object, error) {
			o.SetName("other")
			return o, nil
		}, `hook "bad" may not change /metadata/name`, 422, patch.ErrForbiddenPath},
		{"a moved namespace is rejected by the guard", func(_ context.Context, o client.Object) (client.Object, error) {
			o.SetNamespace("other")
			return o, nil
		}, `may not change /metadata/namespace`, 422, patch.ErrForbiddenPath},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := engine.NewRegistry(nil)
			reg.MustRegister(labelHook{"ok", "a", "b"}, podHook("bad", tc.fn))
			_, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, raw)
			var hookErr *failure.HookError
			if !errors.As(err, &hookErr) || hookErr.Hook != "bad" || hookErr.Type != hooks.CreatePhysical {
				t.Fatalf("error = %v, want a HookError for hook bad", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to contain %q", err, tc.want)
			}
			if tc.target != nil && !errors.Is(err, tc.target) {
				t.Errorf("error %v is not %v", err, tc.target)
			}
			if got := webhook.StatusCode(err); got != tc.code {
				t.Errorf("StatusCode = %d, want %d", got, tc.code)
			}
		})
	}
}

func TestRunAbandonsAHookThatOutlivesTheDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	reg := engine.NewRegistry(nil)
	reg.MustRegister(labelHook{"fast", "a", "b"}, podHook("stuck", func(_ context.Context, o client.Object) (client.Object, error) {
		entered <- struct{}{}
		<-release // ignores its context on purpose
		return o, nil
	}))
	// The deadline passes once the stuck hook runs, never before it (a fixed 50 ms could pass
	// during the decode or the fast hook on a loaded machine, and name neither).
	ctx, expire := expireOnSignal(t.Context())
	expireWhenEntered(t.Context(), entered, expire)
	_, err := reg.Mutate(ctx, podGVK, hooks.CreatePhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `hook "stuck"`) {
		t.Fatalf("error = %v, want a deadline error naming hook stuck", err)
	}
	if webhook.StatusCode(err) != 504 {
		t.Errorf("StatusCode = %d, want 504", webhook.StatusCode(err))
	}
}

func TestRunRejectsMalformedObjects(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(labelHook{"l", "a", "b"})
	for _, raw := range []string{`{`, `[]`, `{"metadata":{"labels":"notamap"}}`} {
		_, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(raw))
		var decodeErr *failure.DecodeError
		if !errors.As(err, &decodeErr) || webhook.StatusCode(err) != 400 {
			t.Errorf("Run(%s) error = %v, want a DecodeError (400)", raw, err)
		}
	}
}

func TestRunOnACustomResourceAsUnstructured(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	res := &unstructured.Unstructured{}
	res.SetGroupVersionKind(gvk)
	reg := engine.NewRegistry(nil)
	reg.MustRegister(funcHook{name: "w", obj: res, fns: map[hooks.HookType]hooks.MutateFunc{
		hooks.GetPhysical: func(_ context.Context, o client.Object) (client.Object, error) {
			u := o.(*unstructured.Unstructured)
			unstructured.RemoveNestedField(u.Object, "spec", "hostOnly")
			return u, nil
		},
	}})
	raw := []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"hostOnly":"x","size":3}}`)
	out, err := reg.Mutate(t.Context(), gvk, hooks.GetPhysical, raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Patch) != `[{"op":"remove","path":"/spec/hostOnly"}]` {
		t.Errorf("patch = %s", out.Patch)
	}
}

func mustObject(t *testing.T, res engine.Result) []byte {
	t.Helper()
	obj, err := res.Object()
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestStuckHooksHoldTheirSlotsAndNewWorkIsRefusedNotQueued(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var running sync.WaitGroup
	reg := engine.NewRegistry(nil)
	reg.MustRegister(podHook("stuck", func(_ context.Context, o client.Object) (client.Object, error) {
		defer running.Done()
		entered <- struct{}{}
		<-release
		return o, nil
	}))
	runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 2})
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	for range 2 {
		running.Add(1)
		// Each deadline passes once its stuck hook runs and holds the slot, never before (a
		// fixed 20 ms could pass before the hook started on a loaded machine).
		ctx, expire := expireOnSignal(t.Context())
		expireWhenEntered(t.Context(), entered, expire)
		_, err := runner.Mutate(ctx, podGVK, hooks.CreatePhysical, raw)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stuck hook: %v", err)
		}
	}
	_, err := runner.Mutate(t.Context(), podGVK, hooks.CreatePhysical, raw)
	if !errors.Is(err, failure.ErrOverloaded) || webhook.StatusCode(err) != 429 {
		t.Fatalf("third run with two stuck hooks: %v, want ErrOverloaded (429)", err)
	}
	close(release)
	running.Wait()
	// The slot is freed right after the hook's goroutine returns: wait until none is held.
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return runner.Stuck(0).Held == 0, nil
	}); err != nil {
		t.Fatalf("slots still held after the stuck hooks returned: %v (%s)", err, runner.Stuck(0))
	}
	running.Add(1)
	_, err = runner.Mutate(t.Context(), podGVK, hooks.CreatePhysical, raw)
	if err != nil {
		t.Fatalf("after the stuck hooks returned: %v", err)
	}
}

type countingObserver struct {
	mu    sync.Mutex
	calls map[string]int
	errs  int
}

func (o *countingObserver) ObserveHook(hook string, _ hooks.HookType, _ schema.GroupVersionKind, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[hook]++
	if err != nil {
		o.errs++
	}
	_ = d
}

func TestObserverSeesEveryHookCall(t *testing.T) {
	obs := &countingObserver{calls: map[string]int{}}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(labelHook{"a", "k", "v"}, podHook("panics", func(context.Context, client.Object) (client.Object, error) { panic("x") }))
	_, err := engine.NewRunner(reg, engine.RunnerOptions{Observer: obs}).Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
	if err == nil {
		t.Fatal("no error")
	}
	if obs.calls["a"] != 1 || obs.calls["panics"] != 1 || obs.errs != 1 {
		t.Errorf("observer saw %v with %d errors", obs.calls, obs.errs)
	}
}

func TestAHookThatRespectsItsOwnDeadlineFailsTheChainEarly(t *testing.T) {
	// The hook would return successfully after a minute; its own 20 ms deadline must end it
	// first. The elapsed time is checked against half that minute: a bound no loaded machine
	// reaches on a 20 ms timer, which a chain that waited for the hook's own end still fails.
	const hookEnd = time.Minute
	reg := engine.NewRegistry(nil)
	reg.MustRegister(podHook("slow", func(ctx context.Context, o client.Object) (client.Object, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(hookEnd):
			return o, nil
		}
	}))
	start := time.Now()
	_, err := engine.NewRunner(reg, engine.RunnerOptions{HookTimeout: 20 * time.Millisecond}).Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
	d := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `hook "slow"`) || webhook.StatusCode(err) != 504 {
		t.Fatalf("error = %v", err)
	}
	if d < 20*time.Millisecond || d > hookEnd/2 {
		t.Errorf("the chain waited %v, not the hook's 20ms", d)
	}
}
