package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
)

// oldLabelHook is an Update hook on kind that labels the object old=<the old object's label v>
// ("none" without an old object), reading it with hooks.DecodeOldObject into a new object
// made by newObj.
func oldLabelHook(name string, resource client.Object, newObj func() client.Object) hooks.ClientHook {
	return hooks.NewFunc(name, resource, []hooks.HookType{hooks.UpdatePhysical, hooks.UpdateVirtual},
		func(ctx context.Context, obj client.Object) (client.Object, error) {
			v := "none"
			old := newObj()
			ok, err := hooks.DecodeOldObject(ctx, old)
			if err != nil {
				return nil, err
			}
			if ok {
				v = old.GetLabels()["v"]
			}
			labels := obj.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels["old"] = v
			obj.SetLabels(labels)
			return obj, nil
		})
}

const (
	newPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","labels":{"v":"2"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
	oldPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","labels":{"v":"1"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
)

func TestOldObjectReachesUpdateHooks(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(oldLabelHook("old-label", &corev1.Pod{}, func() client.Object { return &corev1.Pod{} }))
	const labelled = `[{"op":"add","path":"/metadata/labels/old","value":"%s"}]`
	runners := map[string]*engine.Runner{
		"inline": engine.NewRunner(reg, engine.RunnerOptions{}),
		// slots and a hook timeout: the hooks run on a goroutine of their own
		"supervised": engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 2, HookTimeout: time.Minute}),
	}
	for name, rn := range runners {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			for _, typ := range []hooks.HookType{hooks.UpdatePhysical, hooks.UpdateVirtual} {
				res, err := rn.MutateWithOptions(ctx, podGVK, typ, []byte(newPod), engine.MutateOptions{OldObject: []byte(oldPod)})
				if err != nil {
					t.Fatal(err)
				}
				if want := strings.Replace(labelled, "%s", "1", 1); string(res.Patch) != want {
					t.Errorf("%s with an old object: patch %s, want %s", typ, res.Patch, want)
				}
				// Without one (vcluster's protocols send none): the hook sees none.
				for _, opts := range []engine.MutateOptions{{}, {OldObject: []byte{}}} {
					res, err = rn.MutateWithOptions(ctx, podGVK, typ, []byte(newPod), opts)
					if err != nil {
						t.Fatal(err)
					}
					if want := strings.Replace(labelled, "%s", "none", 1); string(res.Patch) != want {
						t.Errorf("%s without an old object: patch %s, want %s", typ, res.Patch, want)
					}
				}
			}
		})
	}
	res, err := reg.MutateWithOptions(t.Context(), podGVK, hooks.UpdatePhysical, []byte(newPod), engine.MutateOptions{OldObject: []byte(oldPod)})
	if err != nil || string(res.Patch) != strings.Replace(labelled, "%s", "1", 1) {
		t.Errorf("Registry.MutateWithOptions: patch %s, error %v", res.Patch, err)
	}
}

// TestOldObjectIsReadOnlyInput: the old object is the caller's: a hook that appends to its
// bytes does not write into what follows them, and an old object of another name and uid is
// not the object's identity (only the object's is guarded).
func TestOldObjectIsReadOnlyInput(t *testing.T) {
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("appender", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical},
		func(ctx context.Context, obj client.Object) (client.Object, error) {
			raw, ok := hooks.OldObject(ctx)
			if !ok {
				return nil, errors.New("no old object")
			}
			_ = append(raw, "XXXX"...)
			return obj, nil
		}))
	other := strings.NewReplacer(`"name":"p"`, `"name":"q"`, `"uid":"u1"`, `"uid":"u2"`).Replace(oldPod)
	body := []byte(other + "|after")
	old := body[:len(other)] // a sub-slice with room after it, as the webhook's cut of a body
	res, err := reg.MutateWithOptions(t.Context(), podGVK, hooks.UpdatePhysical, []byte(newPod), engine.MutateOptions{OldObject: old})
	if err != nil || res.Patch != nil {
		t.Fatalf("patch %s, error %v; want no change", res.Patch, err)
	}
	if string(body[len(other):]) != "|after" {
		t.Errorf("the bytes after the old object became %q", body[len(other):])
	}
}

func TestOldObjectRefused(t *testing.T) {
	secretGVK := corev1.SchemeGroupVersion.WithKind("Secret")
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		oldLabelHook("old-label", &corev1.Pod{}, func() client.Object { return &corev1.Pod{} }),
		oldLabelHook("old-label-secret", &corev1.Secret{}, func() client.Object { return &corev1.Secret{} }),
		hooks.NewFunc("create", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) { return o, nil }),
	)
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns"}}`
	cases := []struct {
		name   string
		gvk    schema.GroupVersionKind
		typ    hooks.HookType
		raw    string
		old    string
		malfed bool   // a malformed old object (400), else another error
		want   string // in the message
	}{
		{"a Create type", podGVK, hooks.CreatePhysical, newPod, oldPod, false, "an old object is given only with an Update hook type"},
		{"a list", corev1.SchemeGroupVersion.WithKind("PodList"), hooks.UpdatePhysical, `{"apiVersion":"v1","kind":"PodList","items":[]}`, oldPod, true, "decode PodList old object: an old object is for one object, not a list"},
		{"not JSON", podGVK, hooks.UpdatePhysical, newPod, `{"metadata":`, true, "decode Pod old object: unexpected end of JSON input"},
		{"not an object", podGVK, hooks.UpdatePhysical, newPod, `[1]`, true, "decode Pod old object: not a JSON object"},
		{"null", podGVK, hooks.UpdatePhysical, newPod, `null`, true, "decode Pod old object: not a JSON object"},
		{"another kind", podGVK, hooks.UpdatePhysical, newPod, secret, true, "decode Pod old object: old object is v1/Secret but the request is for v1/Pod"},
		{"a case-variant key", podGVK, hooks.UpdatePhysical, newPod, `{"metadata":{"name":"p","Name":"q"}}`, true, `decode Pod old object: metadata: key "Name" differs only in case from "name"`},
		{"a field that does not decode, where the hook reads it", podGVK, hooks.UpdatePhysical, newPod, `{"apiVersion":"v1","kind":"Pod","spec":5}`, true, "malformed old object: json: cannot unmarshal number into Go struct field Pod.spec"},
		{"a Secret's field that does not decode: the message is withheld, the class kept", secretGVK, hooks.UpdatePhysical, secret, `{"data":{"k":"not base64!"}}`, true, "the hook failed on a Secret (malformed old object)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reg.MutateWithOptions(t.Context(), tc.gvk, tc.typ, []byte(tc.raw), engine.MutateOptions{OldObject: []byte(tc.old)})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			kind, _ := failure.Classify(err)
			if got := errors.Is(err, hooks.ErrMalformedOldObject); got != tc.malfed || (kind == failure.Invalid) != tc.malfed {
				t.Errorf("errors.Is(ErrMalformedOldObject) = %v, Classify = %v; want malformed %v", got, kind, tc.malfed)
			}
		})
	}
	// A kind without an Update chain: nothing runs, nothing reads the old object.
	if res, err := reg.MutateWithOptions(t.Context(), corev1.SchemeGroupVersion.WithKind("ConfigMap"), hooks.UpdatePhysical,
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap"}`), engine.MutateOptions{OldObject: []byte(`[1]`)}); err != nil || res.Patch != nil {
		t.Errorf("no chain: patch %s, error %v", res.Patch, err)
	}
}
