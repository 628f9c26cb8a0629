package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/patch"
	"github.com/synchook/synchook/webhook"
)

var podListGVK = corev1.SchemeGroupVersion.WithKind("PodList")

// stripHostLabel removes the label "host" from pods on GetPhysical.
var stripHostLabel = hooks.NewFunc(
	"strip-host", &corev1.Pod{},
	[]hooks.HookType{hooks.GetPhysical},
	func(_ context.Context, o client.Object) (client.Object, error) {
		l := o.GetLabels()
		delete(l, "host")
		o.SetLabels(l)
		return o, nil
	},
)

func listRegistry(t *testing.T, hs ...hooks.ClientHook) *engine.Registry {
	t.Helper()
	reg := engine.NewRegistry(nil)
	for _, h := range hs {
		if err := reg.Register(h); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func opsOf(t *testing.T, p []byte) map[string]string {
	t.Helper()
	var ops []patch.Operation
	if err := json.Unmarshal(p, &ops); err != nil {
		t.Fatalf("patch %s: %v", p, err)
	}
	set := map[string]string{}
	for _, op := range ops {
		set[op.Operation+" "+op.Path] = fmt.Sprint(op.Value)
	}
	return set
}

func TestRunOnAListPatchesEveryItemUnderItsIndex(t *testing.T) {
	reg := listRegistry(t, stripHostLabel)
	raw := []byte(`{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[` +
		`{"metadata":{"name":"a","namespace":"ns","labels":{"host":"x","app":"a"}}},` +
		`{"metadata":{"name":"b","namespace":"ns","labels":{"app":"b"}}},` +
		`{"metadata":{"name":"c","namespace":"ns","labels":{"host":"y"}}}]}`)
	res, err := reg.Mutate(t.Context(), podListGVK, hooks.GetPhysical, raw)
	if err != nil {
		t.Fatal(err)
	}
	got := opsOf(t, res.Patch)
	// Item 2 loses its only label, and an empty label map is not serialised.
	want := map[string]string{"remove /items/0/metadata/labels/host": "<nil>", "remove /items/2/metadata/labels": "<nil>"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("patch %s, want the operations %v", res.Patch, want)
	}
	if res.Operations != 2 || res.Hooks != 3 {
		t.Errorf("Operations = %d, Hooks = %d, want 2 and 3 (one hook call per item)", res.Operations, res.Hooks)
	}
	obj, err := res.Object()
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.PodList
	if err := json.Unmarshal(obj, &list); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if _, ok := p.Labels["host"]; ok {
			t.Errorf("item %s still has the host label: %s", p.Name, obj)
		}
	}
	if list.Items[0].Labels["app"] != "a" || list.ResourceVersion != "7" {
		t.Errorf("the patch touched more than the host labels: %s", obj)
	}
}

func TestRunOnAListKeepsWhatTheTypesDoNotKnow(t *testing.T) {
	reg := listRegistry(t, stripHostLabel)
	raw := []byte(`{"apiVersion":"v1","kind":"PodList","listFuture":{"x":1},"metadata":{},"items":[` +
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","futureMeta":12345678901234567890,"labels":{"host":"x","app":"a"}},` +
		`"spec":{"futureField":"keep","containers":[{"name":"c","image":"i","futureContainerField":true}]}}]}`)
	res, err := reg.Mutate(t.Context(), podListGVK, hooks.GetPhysical, raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Patch) != `[{"op":"remove","path":"/items/0/metadata/labels/host"}]` {
		t.Errorf("patch = %s, want only the label removal", res.Patch)
	}
	obj, err := res.Object()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"listFuture":{"x":1}`, `"futureMeta":12345678901234567890`, `"futureField":"keep"`, `"futureContainerField":true`} {
		if !strings.Contains(string(obj), want) {
			t.Errorf("patched list lost %s: %s", want, obj)
		}
	}
}

func TestRunOnAListOfUnstructuredItemsWithoutKind(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	res := &unstructured.Unstructured{}
	res.SetGroupVersionKind(gvk)
	var (
		mu   sync.Mutex // items run in parallel
		seen = ""
	)
	reg := listRegistry(t, hooks.NewFunc(
		"widget-size", res,
		[]hooks.HookType{hooks.GetVirtual},
		func(_ context.Context, o client.Object) (client.Object, error) {
			u := o.(*unstructured.Unstructured)
			mu.Lock()
			seen += u.GetAPIVersion() + "/" + u.GetKind() + " "
			mu.Unlock()
			return u, unstructured.SetNestedField(u.Object, int64(3), "spec", "size")
		},
	))
	// Items as the API server lists them: without apiVersion and kind; and a large integer.
	raw := []byte(`{"apiVersion":"example.com/v1","kind":"WidgetList","items":[{"metadata":{"name":"w"},"spec":{"big":12345678901234567890}}, {}]}`)
	out, err := reg.Mutate(t.Context(), gvk.GroupVersion().WithKind("WidgetList"), hooks.GetVirtual, raw)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"add /items/0/spec/size": "3", "add /items/1/spec": "map[size:3]"}
	if got := opsOf(t, out.Patch); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("patch = %s, want %v", out.Patch, want)
	}
	if seen != "example.com/v1/Widget example.com/v1/Widget " {
		t.Errorf("the hook saw %q, want items with apiVersion and kind filled in", seen)
	}
	obj, err := out.Object()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(obj), `"kind"`) != 1 || !strings.Contains(string(obj), `"big":12345678901234567890`) {
		t.Errorf("the patched list gained kinds or lost precision: %s", obj)
	}
}

func TestRunOnAListFailsTheWholeBatchNamingTheItem(t *testing.T) {
	items := `[{"metadata":{"name":"ok","namespace":"ns"}},{"metadata":{"name":"bad","namespace":"ns","labels":{"deny":"yes"}}}]`
	raw := []byte(`{"apiVersion":"v1","kind":"PodList","items":` + items + `}`)
	refuse := hooks.NewFunc("refuse", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		if o.GetLabels()["deny"] == "yes" {
			return nil, errors.New("no thanks")
		}
		o.SetLabels(map[string]string{"seen": "yes"})
		return o, nil
	})
	rename := hooks.NewFunc("rename", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		if o.GetName() == "bad" {
			o.SetName("other")
		}
		return o, nil
	})
	cases := []struct {
		name   string
		hook   hooks.ClientHook
		raw    string
		want   string
		code   int32
		hookIs bool
	}{
		{
			"a hook error names the hook and the item", refuse, string(raw),
			`PodList items[1] (ns/bad): hook "refuse" GetPhysical Pod: no thanks`, 403, true,
		},
		{
			"a protected field change names the item", rename, string(raw),
			`PodList items[1] (ns/bad): hook "rename" GetPhysical Pod: hook "rename" may not change /metadata/name`, 422, true,
		},
		{
			"an item of another kind is a decode error naming the item", stripHostLabel,
			`{"items":[{},{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"}}]}`,
			`PodList items[1] (svc): decode Pod object: item is v1/Service but the list is of v1/Pod`, 400, false,
		},
		{
			"an item that is not an object is a decode error", stripHostLabel, `{"items":[{},"pod"]}`,
			`PodList items[1] (): decode Pod object: item is not a JSON object`, 400, false,
		},
		{"items that are not an array are a decode error", stripHostLabel, `{"items":{}}`, `decode PodList object`, 400, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := listRegistry(t, tc.hook)
			res, err := reg.Mutate(t.Context(), podListGVK, hooks.GetPhysical, []byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if res.Patch != nil {
				t.Errorf("a failed batch returned the patch %s", res.Patch)
			}
			if got := webhook.StatusCode(err); got != tc.code {
				t.Errorf("StatusCode = %d, want %d", got, tc.code)
			}
			var hookErr *failure.HookError
			if errors.As(err, &hookErr) != tc.hookIs {
				t.Errorf("errors.As(HookError) = %v, want %v", !tc.hookIs, tc.hookIs)
			}
		})
	}
}

// TestRunOnAListReportsTheLowestFailingItem: items run in parallel, but the error is always
// the one of the failing item with the lowest index, whichever failed first.
func TestRunOnAListReportsTheLowestFailingItem(t *testing.T) {
	// Items run on GOMAXPROCS goroutines: at least two, so that pod-7 can wait for a later item.
	prev := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	type round struct {
		once        sync.Once
		laterFailed chan struct{}
	}
	var current atomic.Pointer[round]
	refuse := hooks.NewFunc("refuse", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		if o.GetLabels()["deny"] == "yes" {
			r := current.Load()
			if o.GetName() == "pod-7" {
				<-r.laterFailed // a later item fails first
			} else {
				r.once.Do(func() { close(r.laterFailed) })
			}
			return nil, errors.New("no thanks")
		}
		return o, nil
	})
	reg := listRegistry(t, refuse)
	var items []string
	for i := range 40 {
		labels := ""
		if i >= 7 {
			labels = `,"labels":{"deny":"yes"}`
		}
		items = append(items, fmt.Sprintf(`{"metadata":{"name":"pod-%d"%s}}`, i, labels))
	}
	raw := []byte(`{"items":[` + strings.Join(items, ",") + `]}`)
	for range 5 {
		current.Store(&round{laterFailed: make(chan struct{})})
		_, err := reg.Mutate(t.Context(), podListGVK, hooks.GetPhysical, raw)
		var itemErr *engine.ItemError
		if !errors.As(err, &itemErr) || itemErr.Index != 7 || itemErr.Name != "pod-7" {
			t.Fatalf("error = %v, want items[7] (pod-7)", err)
		}
	}
}

func TestRunOnAListSharesOneDeadline(t *testing.T) {
	// Each item but the first takes a fifth of the request's deadline, so that every item would
	// be in time under a deadline of its own, while together they outlast the one deadline of
	// the List. The first item returns at once: it is done long before the deadline however
	// loaded the machine, so the item that fails is a later one. Timers only fire late, never
	// early, so load can only make the later items later.
	const deadline = time.Second
	slow := hooks.NewFunc("slow", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, func(ctx context.Context, o client.Object) (client.Object, error) {
		if o.GetName() == "first" {
			return o, nil
		}
		select {
		case <-time.After(deadline / 5):
			return o, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	reg := listRegistry(t, slow)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	// Items run GOMAXPROCS at a time: enough of them (six rounds of a fifth) that the rounds
	// outlast the deadline.
	raw := []byte(`{"items":[{"metadata":{"name":"first"}}` + strings.Repeat(`,{}`, 6*runtime.GOMAXPROCS(0)) + `]}`)
	_, err := reg.Mutate(ctx, podListGVK, hooks.GetPhysical, raw)
	var itemErr *engine.ItemError
	if !errors.As(err, &itemErr) || itemErr.Index < 1 || webhook.StatusCode(err) != 504 {
		t.Fatalf("error = %v, want a deadline (504) on a later item", err)
	}
}

func TestRunOnAListWithNothingToDo(t *testing.T) {
	reg := listRegistry(t, stripHostLabel)
	cases := []struct {
		name string
		gvk  schema.GroupVersionKind
		typ  hooks.HookType
		raw  string
	}{
		{"an empty list", podListGVK, hooks.GetPhysical, `{"items":[]}`},
		{"a list without items", podListGVK, hooks.GetPhysical, `{"metadata":{}}`},
		{"items that no hook changes", podListGVK, hooks.GetPhysical, `{"items":[{"metadata":{"name":"a"}}]}`},
		{"a hook type the item kind has no hooks for", podListGVK, hooks.GetVirtual, `{"items":[{"metadata":{"labels":{"host":"x"}}}]}`},
		{"a list of another kind", corev1.SchemeGroupVersion.WithKind("ServiceList"), hooks.GetPhysical, `{"items":[{"metadata":{"labels":{"host":"x"}}}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name+" gives no patch", func(t *testing.T) {
			res, err := reg.Mutate(t.Context(), tc.gvk, tc.typ, []byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			obj, err := res.Object()
			if err != nil || res.Patch != nil || string(obj) != tc.raw {
				t.Errorf("Result = %+v, Object %s, %v; want no patch and the request object", res, obj, err)
			}
		})
	}
}

func TestListKindsInHasAndCapabilities(t *testing.T) {
	reg := listRegistry(t, stripHostLabel)
	if !reg.Has(podGVK, hooks.GetPhysical) || reg.Has(podListGVK, hooks.GetPhysical) {
		t.Errorf("Has must name item kinds only")
	}
	for _, rc := range reg.Capabilities().Resources {
		if strings.HasSuffix(rc.Kind, "List") {
			t.Errorf("Capabilities lists the list kind %s", rc.Kind)
		}
	}
	for _, tc := range []struct {
		list schema.GroupVersionKind
		item string
		ok   bool
	}{
		{podListGVK, "/v1, Kind=Pod", true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"}, "apps/v1, Kind=Deployment", true},
		{corev1.SchemeGroupVersion.WithKind("List"), "/, Kind=", false},
		{podGVK, "/, Kind=", false},
	} {
		item, ok := engine.ListItemGVK(tc.list)
		if item.String() != tc.item || ok != tc.ok {
			t.Errorf("ListItemGVK(%s) = %s, %v; want %s, %v", tc.list, item, ok, tc.item, tc.ok)
		}
	}
}

func TestAKindNamedLikeAListWithItsOwnHooksIsNotABatch(t *testing.T) {
	// A custom resource whose kind ends in "List" and that has hooks itself runs as one object.
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "ShoppingList"}
	res := &unstructured.Unstructured{}
	res.SetGroupVersionKind(gvk)
	item := &unstructured.Unstructured{}
	item.SetGroupVersionKind(gvk.GroupVersion().WithKind("Shopping"))
	mark := func(_ context.Context, o client.Object) (client.Object, error) {
		o.SetLabels(map[string]string{"by": o.GetObjectKind().GroupVersionKind().Kind})
		return o, nil
	}
	reg := listRegistry(t,
		hooks.NewFunc("shopping-list", res, []hooks.HookType{hooks.CreatePhysical}, mark),
		hooks.NewFunc("shopping", item, []hooks.HookType{hooks.CreatePhysical}, mark))
	out, err := reg.Mutate(t.Context(), gvk, hooks.CreatePhysical, []byte(`{"apiVersion":"example.com/v1","kind":"ShoppingList","metadata":{"name":"s"},"items":[{}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Patch) != `[{"op":"add","path":"/metadata/labels","value":{"by":"ShoppingList"}}]` {
		t.Errorf("patch = %s, want the ShoppingList chain on the object itself", out.Patch)
	}
}

func TestABatchedListTakesOneConcurrencySlot(t *testing.T) {
	entered, release := make(chan struct{}, 16), make(chan struct{})
	reg := listRegistry(t, hooks.NewFunc("wait", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		entered <- struct{}{}
		<-release
		return o, nil
	}))
	runner := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 1})
	raw := []byte(`{"apiVersion":"v1","kind":"PodList","items":[` +
		`{"metadata":{"name":"a"}},{"metadata":{"name":"b"}},{"metadata":{"name":"c"}},{"metadata":{"name":"d"}}]}`)
	done := make(chan error, 1)
	go func() {
		_, err := runner.Mutate(context.Background(), podListGVK, hooks.GetPhysical, raw)
		done <- err
	}()
	<-entered // the list holds the one slot, its items running
	_, err := runner.Mutate(t.Context(), podGVK, hooks.GetPhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
	if !errors.Is(err, failure.ErrOverloaded) {
		t.Errorf("a single pod while the list runs: %v, want ErrOverloaded", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the list with every item sharing its one slot: %v", err)
	}
}

// MutateValidJSON skips only the JSON checks: on valid requests, a single object and a List,
// through the label fast path and the typed path, it answers exactly as Mutate.
func TestMutateValidJSONAnswersAsMutate(t *testing.T) {
	setTenant := func(_ context.Context, m *hooks.Metadata) error {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels["tenant"] = "a"
		delete(m.Labels, "host")
		return nil
	}
	typed := func(_ context.Context, o client.Object) (client.Object, error) {
		m := &hooks.Metadata{Labels: o.GetLabels()}
		_ = setTenant(context.Background(), m)
		o.SetLabels(m.Labels)
		return o, nil
	}
	for name, hook := range map[string]hooks.ClientHook{
		"label fast path": hooks.NewMetadataFunc("tenant", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, typed, setTenant),
		"typed path":      stripHostLabel,
	} {
		rn := engine.NewRunner(listRegistry(t, hook), engine.RunnerOptions{})
		for _, req := range []struct {
			gvk schema.GroupVersionKind
			raw string
		}{
			{corev1.SchemeGroupVersion.WithKind("Pod"), `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"host":"h","app":"x"}}}`},
			{podListGVK, `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a","labels":{"host":"h"}}},{"metadata":{"name":"b"}}]}`},
		} {
			want, err := rn.Mutate(t.Context(), req.gvk, hooks.GetPhysical, []byte(req.raw))
			if err != nil {
				t.Fatalf("%s %s: Mutate: %v", name, req.gvk.Kind, err)
			}
			got, err := rn.MutateValidJSON(t.Context(), req.gvk, hooks.GetPhysical, []byte(req.raw))
			if err != nil {
				t.Fatalf("%s %s: MutateValidJSON: %v", name, req.gvk.Kind, err)
			}
			gotAnswer, gotErr := got.Answer()
			wantAnswer, wantErr := want.Answer()
			if string(got.Patch) != string(want.Patch) || string(gotAnswer) != string(wantAnswer) || gotErr != nil || wantErr != nil || want.Patch == nil {
				t.Errorf("%s %s: MutateValidJSON patch %s answer %s (%v), Mutate patch %s answer %s (%v)", name, req.gvk.Kind,
					got.Patch, gotAnswer, gotErr, want.Patch, wantAnswer, wantErr)
			}
		}
	}
}
