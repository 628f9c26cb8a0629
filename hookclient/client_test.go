package hookclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/synchook/synchook/hookclient"

	"github.com/synchook/synchook/hooks"
)

func TestMutateReplacesTheObjectWithThePatchedOne(t *testing.T) {
	clearNode := func(_ context.Context, o client.Object) (client.Object, error) {
		o.(*corev1.Pod).Spec.NodeName = ""
		return labelFn("added", "yes")(t.Context(), o)
	}
	s := startSidecar(t, registry(t, hooks.NewFunc("h", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, clearNode)), "", nil)
	c := newClient(t, s, hookclient.Options{})

	t.Run("a typed object loses the fields a hook removed", func(t *testing.T) {
		p := pod("web", map[string]string{"drop": "x", "keep": "y"})
		p.Spec.NodeName = "node-1"
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, p); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(p.Labels) != "map[added:yes keep:y]" || p.Spec.NodeName != "" {
			t.Errorf("labels %v nodeName %q, want the hook's result exactly", p.Labels, p.Spec.NodeName)
		}
		if p.APIVersion != "" || p.Kind != "" {
			t.Errorf("TypeMeta became %q %q, want it left empty as it was", p.APIVersion, p.Kind)
		}
	})

	t.Run("an unstructured object loses the fields a hook removed", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		u.SetName("web")
		u.SetLabels(map[string]string{"drop": "x"})
		if err := unstructured.SetNestedField(u.Object, "node-1", "spec", "nodeName"); err != nil {
			t.Fatal(err)
		}
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, u); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); found || fmt.Sprint(u.GetLabels()) != "map[added:yes]" {
			t.Errorf("object = %v", u.Object)
		}
	})
}

func TestCapabilitiesSpareRequestsForKindsWithoutHooks(t *testing.T) {
	s := startSidecar(t, registry(t, hooks.NewFunc("h", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, labelFn("a", "b"))), "", nil)
	clk := clocktesting.NewFakeClock(time.Now())
	c := newClient(t, s, hookclient.Options{CapabilitiesInterval: 200 * time.Millisecond, Clock: clk})
	ctx := t.Context()

	for range 10 {
		cm := &corev1.ConfigMap{}
		cm.Name = "cm"
		if err := c.Mutate(ctx, hooks.CreatePhysical, cm); err != nil {
			t.Fatal(err)
		}
		if err := c.Mutate(ctx, hooks.GetPhysical, pod("p", nil)); err != nil {
			t.Fatal(err)
		}
		if err := c.MutateList(ctx, hooks.CreatePhysical, &corev1.ConfigMapList{Items: []corev1.ConfigMap{*cm}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, caps := s.mutations(), s.count("/capabilities"); n != 0 || caps != 1 {
		t.Fatalf("%d mutate and %d capabilities requests for kinds without hooks, want 0 and 1", n, caps)
	}
	if !c.Hooked(ctx, corev1.SchemeGroupVersion.WithKind("PodList"), hooks.CreatePhysical) {
		t.Errorf("Hooked(PodList) = false, want true: its items have hooks")
	}
	if err := c.Mutate(ctx, hooks.CreatePhysical, pod("p", nil)); err != nil {
		t.Fatal(err)
	}
	if n := s.mutations(); n != 1 {
		t.Errorf("%d mutate requests for a hooked kind, want 1", n)
	}
	clk.Step(250 * time.Millisecond) // past the refresh interval
	if err := c.Mutate(ctx, hooks.CreatePhysical, pod("p", nil)); err != nil {
		t.Fatal(err)
	}
	if caps := s.count("/capabilities"); caps != 2 {
		t.Errorf("%d capabilities requests after the refresh interval, want 2", caps)
	}
}

func TestFailurePolicy(t *testing.T) {
	refusing := registry(t, hooks.NewFunc("refuse", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.GetPhysical}, refuseFn))
	labelling := registry(t, hooks.NewFunc("h", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.GetPhysical}, labelFn("a", "b")))
	status500 := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	}
	// slow never answers a hook call: it holds the request until the client gives up (its
	// Timeout) and hangs up, so that the client's timeout, not a race between two wall-clock
	// waits, decides the outcome.
	slow := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/mutate/") {
				drain(r.Body) // read to its end, so that the server sees the client hang up
				<-r.Context().Done()
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	type sidecarKind int
	const (
		down sidecarKind = iota
		failing
		tooSlow
		refusingHook
	)
	cases := []struct {
		name     string
		sidecar  sidecarKind
		typ      hooks.HookType
		policies map[hooks.HookType]hookclient.FailurePolicy
		want     error // nil: no error, object unmutated
		code     int32
	}{
		{"Create fails by default when the sidecar is down", down, hooks.CreatePhysical, nil, hookclient.ErrUnavailable, 0},
		{"Get goes on unmutated by default when the sidecar is down", down, hooks.GetPhysical, nil, nil, 0},
		{"Get fails when its policy is Fail", down, hooks.GetPhysical, map[hooks.HookType]hookclient.FailurePolicy{hooks.GetPhysical: hookclient.Fail}, hookclient.ErrUnavailable, 0},
		{"Create goes on unmutated when its policy is Ignore", down, hooks.CreatePhysical, map[hooks.HookType]hookclient.FailurePolicy{hooks.CreatePhysical: hookclient.Ignore}, nil, 0},
		{"Create fails on an HTTP 500", failing, hooks.CreatePhysical, nil, hookclient.ErrUnavailable, 500},
		{"Get ignores an HTTP 500", failing, hooks.GetPhysical, nil, nil, 0},
		{"Create fails when the sidecar outlives the timeout", tooSlow, hooks.CreatePhysical, nil, hookclient.ErrUnavailable, 0},
		{"Get ignores a sidecar that outlives the timeout", tooSlow, hooks.GetPhysical, nil, nil, 0},
		{"a hook's refusal fails Create", refusingHook, hooks.CreatePhysical, nil, hookclient.ErrDenied, 403},
		{"a hook's refusal fails Get even under Ignore", refusingHook, hooks.GetPhysical, nil, hookclient.ErrDenied, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Only the sidecar that never answers needs the client's timeout to pass: it is short
			// for it (any value gives the same outcome) and, for every other sidecar, a bound
			// that an answer over loopback meets on a loaded machine, so that a slow TLS
			// handshake under the race detector is never mistaken for a sidecar that is down.
			timeout := 30 * time.Second
			if tc.sidecar == tooSlow {
				timeout = 300 * time.Millisecond
			}
			opts := hookclient.Options{FailurePolicies: tc.policies, Timeout: timeout, Retries: hookclient.NoRetries}
			var s *sidecar
			switch tc.sidecar {
			case down:
				s = startSidecar(t, labelling, "", nil)
				opts.URL = "https://" + freePort(t)
			case failing:
				s = startSidecar(t, labelling, "", status500)
			case tooSlow:
				s = startSidecar(t, labelling, "", slow)
			case refusingHook:
				s = startSidecar(t, refusing, "", nil)
			}
			c := newClient(t, s, opts)
			p := pod("web", map[string]string{"drop": "x"})
			err := c.Mutate(t.Context(), tc.typ, p)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("error = %v, want none", err)
				}
			} else {
				var hookErr *hookclient.Error
				if !errors.Is(err, tc.want) || !errors.As(err, &hookErr) {
					t.Fatalf("error = %v, want a *hookclient.Error wrapping %v", err, tc.want)
				}
				if hookErr.Code != tc.code {
					t.Errorf("Code = %d, want %d", hookErr.Code, tc.code)
				}
				if prefix := string(tc.typ) + " v1 Pod ns/web: "; !strings.HasPrefix(err.Error(), prefix) {
					t.Errorf("error %q does not start with %q", err, prefix)
				}
			}
			if p.Labels["drop"] != "x" || p.Labels["a"] != "" {
				t.Errorf("labels = %v, want the object unmutated", p.Labels)
			}
		})
	}
}

func TestAHookRefusalNamesTheHook(t *testing.T) {
	s := startSidecar(t, registry(t, hooks.NewFunc("refuse", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, refuseFn)), "", nil)
	c := newClient(t, s, hookclient.Options{})
	err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil))
	want := `CreatePhysical v1 Pod ns/web: denied by the sidecar (403): hook "refuse" CreatePhysical Pod: not this one`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant   %s", err, want)
	}
}

func TestCanceledContextIsAnErrorUnderIgnore(t *testing.T) {
	s := startSidecar(t, registry(t, hooks.NewFunc("h", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, labelFn("a", "b"))), "", nil)
	c := newClient(t, s, hookclient.Options{})
	if err := c.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Mutate(ctx, hooks.GetPhysical, pod("web", nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestRetriesOnlyWhenTheRequestNeverReachedTheSidecar(t *testing.T) {
	reg := registry(t, hooks.NewFunc("h", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, labelFn("a", "b")))

	t.Run("a refused connection is retried until the sidecar is up", func(t *testing.T) {
		addr := freePort(t)
		template := startSidecar(t, reg, "", nil) // only for its CA file
		clk := clocktesting.NewFakeClock(time.Now())
		c := newClient(t, template, hookclient.Options{URL: "https://" + addr, Retries: 6, RetryBackoff: 50 * time.Millisecond, Clock: clk})
		started := make(chan *sidecar, 1)
		go func() {
			// The client's first attempt is refused and it waits out its backoff on the fake
			// clock: start the sidecar, then end the wait.
			for !clk.HasWaiters() {
				goruntime.Gosched()
			}
			late := startSidecar(t, reg, addr, nil)
			late.cert.Store(template.cert.Load())
			started <- late
			clk.Step(50 * time.Millisecond)
		}()
		p := pod("web", nil)
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, p); err != nil {
			t.Fatalf("error = %v, want success after the sidecar came up", err)
		}
		if p.Labels["a"] != "b" {
			t.Errorf("labels = %v", p.Labels)
		}
		if late := <-started; late.mutations() != 1 {
			t.Errorf("the sidecar got %d mutate requests, want 1", late.mutations())
		}
	})

	t.Run("a request that reached the sidecar is not retried", func(t *testing.T) {
		abort := func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/mutate/") {
					drain(r.Body)
					panic(http.ErrAbortHandler) // the connection dies after the request arrived
				}
				h.ServeHTTP(w, r)
			})
		}
		s := startSidecar(t, reg, "", abort)
		c := newClient(t, s, hookclient.Options{Retries: 6, RetryBackoff: time.Millisecond})
		err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil))
		if !errors.Is(err, hookclient.ErrUnavailable) {
			t.Fatalf("error = %v, want ErrUnavailable", err)
		}
		if n := s.mutations(); n != 1 {
			t.Errorf("the sidecar got %d mutate requests, want 1 (no retry)", n)
		}
	})

	t.Run("a refused connection with retries off fails at once", func(t *testing.T) {
		s := startSidecar(t, reg, "", nil)
		clk := clocktesting.NewFakeClock(time.Now())
		c := newClient(t, s, hookclient.Options{URL: "https://" + freePort(t), Retries: hookclient.NoRetries, RetryBackoff: time.Second, Clock: clk})
		// A backoff would wait on the fake clock, which never moves: Mutate returns at all
		// only because it does not wait.
		err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil))
		if !errors.Is(err, hookclient.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("error = %v, want connection refused", err)
		}
		if clk.HasWaiters() {
			t.Error("the client set a backoff timer with retries off")
		}
	})
}

func TestOneKeepAliveHTTP1Connection(t *testing.T) {
	s := startSidecar(t, registry(t, hooks.NewFunc("h", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, labelFn("a", "b"))), "", nil)
	c := newClient(t, s, hookclient.Options{})
	for range 20 {
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil)); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connCount != 1 || s.protos[1] != 21 || s.protos[2] != 0 {
		t.Errorf("%d connections, protocols %v; want 1 connection and 21 HTTP/1.1 requests (the server offers h2)", s.connCount, s.protos)
	}
}

func TestCARotation(t *testing.T) {
	reg := registry(t, hooks.NewFunc("h", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, labelFn("a", "b")))

	t.Run("a rotated CA is used as soon as the server presents a certificate from it", func(t *testing.T) {
		s := startSidecar(t, reg, "", nil)
		c := newClient(t, s, hookclient.Options{CAReloadInterval: time.Hour})
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil)); err != nil {
			t.Fatal(err)
		}
		next := authority(t)
		s.cert.Store(keyPair(t, next))
		copyFile(t, next.CAFile(), s.CAFile)
		s.closeConns(t)
		p := pod("web", nil)
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, p); err != nil {
			t.Fatalf("after the rotation: %v", err)
		}
		if p.Labels["a"] != "b" {
			t.Errorf("labels = %v", p.Labels)
		}
	})

	t.Run("a rotated CA file is read again after the reload interval", func(t *testing.T) {
		s := startSidecar(t, reg, "", nil)
		clk := clocktesting.NewFakeClock(time.Now())
		c := newClient(t, s, hookclient.Options{CAReloadInterval: 50 * time.Millisecond, Clock: clk})
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil)); err != nil {
			t.Fatal(err)
		}
		next := authority(t)
		copyFile(t, next.CAFile(), s.CAFile)
		clk.Step(100 * time.Millisecond) // past the reload interval
		// The client reads the new CA, drops its idle connections and must now fail against
		// the old certificate: proof that the new file is in use.
		err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil))
		if !errors.Is(err, hookclient.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("error = %v, want a certificate error", err)
		}
		s.cert.Store(keyPair(t, next))
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil)); err != nil {
			t.Fatalf("with the server on the new CA: %v", err)
		}
	})

	t.Run("a CA file that appears later is picked up", func(t *testing.T) {
		s := startSidecar(t, reg, "", nil)
		caFile := s.CAFile + ".late"
		c := newClient(t, s, hookclient.Options{CAFile: caFile, Retries: hookclient.NoRetries})
		err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil))
		if !errors.Is(err, hookclient.ErrUnavailable) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("error = %v, want ErrUnavailable wrapping a missing file", err)
		}
		copyFile(t, s.CAFile, caFile)
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a broken CA file keeps the CA in use", func(t *testing.T) {
		s := startSidecar(t, reg, "", nil)
		clk := clocktesting.NewFakeClock(time.Now())
		c := newClient(t, s, hookclient.Options{CAReloadInterval: time.Millisecond, Clock: clk})
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.CAFile, []byte("not PEM"), 0o600); err != nil {
			t.Fatal(err)
		}
		clk.Step(5 * time.Millisecond) // past the reload interval
		s.closeConns(t)
		if err := c.Mutate(t.Context(), hooks.CreatePhysical, pod("web", nil)); err != nil {
			t.Fatalf("with a broken CA file: %v", err)
		}
	})
}

func TestMutateListIsOneRequest(t *testing.T) {
	strip := hooks.NewFunc("strip", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, labelFn("seen", "yes"))
	s := startSidecar(t, registry(t, strip), "", nil)
	newList := func(n int) *corev1.PodList {
		list := &corev1.PodList{}
		for i := range n {
			list.Items = append(list.Items, *pod(fmt.Sprintf("p%03d", i), map[string]string{"drop": "x"}))
		}
		return list
	}
	check := func(t *testing.T, items []runtime.Object) {
		t.Helper()
		for i, o := range items {
			p := o.(*corev1.Pod)
			if p.Name != fmt.Sprintf("p%03d", i) || fmt.Sprint(p.Labels) != "map[seen:yes]" {
				t.Fatalf("items[%d] = %s %v", i, p.Name, p.Labels)
			}
		}
	}

	t.Run("a list of 200 pods is one request", func(t *testing.T) {
		c := newClient(t, s, hookclient.Options{})
		before := s.count("/mutate/GetPhysical")
		list := newList(200)
		if err := c.MutateList(t.Context(), hooks.GetPhysical, list); err != nil {
			t.Fatal(err)
		}
		if n := s.count("/mutate/GetPhysical") - before; n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
		items := make([]runtime.Object, len(list.Items))
		for i := range list.Items {
			items[i] = &list.Items[i]
		}
		check(t, items)
	})

	t.Run("a list longer than MaxBatchBytes is split into whole items", func(t *testing.T) {
		c := newClient(t, s, hookclient.Options{MaxBatchBytes: 4000})
		before := s.count("/mutate/GetPhysical")
		list := newList(100)
		if err := c.MutateList(t.Context(), hooks.GetPhysical, list); err != nil {
			t.Fatal(err)
		}
		if n := s.count("/mutate/GetPhysical") - before; n < 3 || n > 10 {
			t.Errorf("%d requests, want a few", n)
		}
		items := make([]runtime.Object, len(list.Items))
		for i := range list.Items {
			items[i] = &list.Items[i]
		}
		check(t, items)
	})

	t.Run("an unstructured list is patched item by item", func(t *testing.T) {
		c := newClient(t, s, hookclient.Options{})
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("v1")
		list.SetKind("PodList")
		for i := range 3 {
			u := unstructured.Unstructured{}
			u.SetAPIVersion("v1")
			u.SetKind("Pod")
			u.SetName(fmt.Sprintf("p%03d", i))
			u.SetLabels(map[string]string{"drop": "x"})
			list.Items = append(list.Items, u)
		}
		if err := c.MutateList(t.Context(), hooks.GetPhysical, list); err != nil {
			t.Fatal(err)
		}
		for i, u := range list.Items {
			if u.GetName() != fmt.Sprintf("p%03d", i) || fmt.Sprint(u.GetLabels()) != "map[seen:yes]" {
				t.Errorf("items[%d] = %v", i, u.Object)
			}
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opts hookclient.Options
		want string
	}{
		{"a missing URL", hookclient.Options{CAFile: "ca.crt"}, "URL is required"},
		{"a plain-HTTP URL", hookclient.Options{URL: "http://127.0.0.1:9443", CAFile: "ca.crt"}, "want https://host:port"},
		{"a missing CA file", hookclient.Options{URL: "https://127.0.0.1:9443"}, "CAFile is required"},
		{"an unknown hook type", hookclient.Options{
			URL: "https://127.0.0.1:9443", CAFile: "ca.crt",
			FailurePolicies: map[hooks.HookType]hookclient.FailurePolicy{"ApplyPhysical": hookclient.Fail},
		}, `unknown hook type "ApplyPhysical"`},
		{"an unknown policy", hookclient.Options{
			URL: "https://127.0.0.1:9443", CAFile: "ca.crt",
			FailurePolicies: map[hooks.HookType]hookclient.FailurePolicy{hooks.GetVirtual: "Retry"},
		}, `"Retry": want "Fail" or "Ignore"`},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is rejected", func(t *testing.T) {
			_, err := hookclient.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestAListPatchOutsideTheItemsSentIsASidecarFailure(t *testing.T) {
	strip := hooks.NewFunc("strip", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, labelFn("seen", "yes"))
	for _, bad := range []string{
		`[{"op":"add","path":"/items/2/metadata/labels","value":{}}]`,
		`[{"op":"add","path":"/metadata/labels","value":{}}]`,
		`[{"op":"remove","path":"/items/0"}]`,
		`[{"op":"add","path":"/items/01/metadata/labels","value":{}}]`,
		`[{"op":"move","from":"/items/1/metadata/labels","path":"/items/0/metadata/labels"}]`,
	} {
		t.Run(bad+" is refused", func(t *testing.T) {
			answer := func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !strings.HasPrefix(r.URL.Path, "/mutate/") {
						h.ServeHTTP(w, r)
						return
					}
					var review admissionv1.AdmissionReview
					if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
						http.Error(w, "bad review", http.StatusBadRequest)
						return
					}
					pt := admissionv1.PatchTypeJSONPatch
					review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true, PatchType: &pt, Patch: []byte(bad)}
					review.Request = nil
					_ = json.NewEncoder(w).Encode(&review)
				})
			}
			s := startSidecar(t, registry(t, strip), "", answer)
			c := newClient(t, s, hookclient.Options{FailurePolicies: map[hooks.HookType]hookclient.FailurePolicy{hooks.GetPhysical: hookclient.Fail}})
			list := &corev1.PodList{Items: []corev1.Pod{*pod("a", map[string]string{"x": "y"}), *pod("b", map[string]string{"x": "y"})}}
			err := c.MutateList(t.Context(), hooks.GetPhysical, list)
			if !errors.Is(err, hookclient.ErrUnavailable) {
				t.Fatalf("error = %v, want ErrUnavailable", err)
			}
			for _, p := range list.Items {
				if fmt.Sprint(p.Labels) != "map[x:y]" {
					t.Errorf("item %s changed to %v by a refused patch", p.Name, p.Labels)
				}
			}
		})
	}
}

// A List sent in several requests changes no item unless every request succeeds: the items of
// the first batch are not left relabelled when a later batch fails.
func TestAListFailingInALaterBatchChangesNoItem(t *testing.T) {
	strip := hooks.NewFunc("strip", &corev1.Pod{}, []hooks.HookType{hooks.GetPhysical}, labelFn("seen", "yes"))
	var mu sync.Mutex
	calls := 0
	failLater := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/mutate/") {
				mu.Lock()
				calls++
				n := calls
				mu.Unlock()
				if n > 1 {
					http.Error(w, "sidecar trouble", http.StatusInternalServerError)
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	}
	s := startSidecar(t, registry(t, strip), "", failLater)
	c := newClient(t, s, hookclient.Options{MaxBatchBytes: 4000, FailurePolicies: map[hooks.HookType]hookclient.FailurePolicy{hooks.GetPhysical: hookclient.Fail}})
	list := &corev1.PodList{}
	for i := range 60 { // several batches of MaxBatchBytes; a label change the client makes in place
		list.Items = append(list.Items, *pod(fmt.Sprintf("p%03d", i), map[string]string{"drop": "x", "app": "a"}))
	}
	if err := c.MutateList(t.Context(), hooks.GetPhysical, list); err == nil {
		t.Fatalf("MutateList succeeded after %d requests, want the later batch's failure; items[0] %v", calls, list.Items[0].Labels)
	}
	if calls < 2 {
		t.Fatalf("%d requests, want the list split into several", calls)
	}
	for _, p := range list.Items {
		if fmt.Sprint(p.Labels) != "map[app:a drop:x]" {
			t.Errorf("item %s changed to %v although a later batch failed", p.Name, p.Labels)
		}
	}
}
