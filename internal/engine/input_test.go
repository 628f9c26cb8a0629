package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/patch"
	"github.com/synchook/synchook/webhook"
)

// inputRegistry has, for the input check: a typed label hook on Pod CreatePhysical (with undo,
// so GetPhysical is an undo read), a label/annotation fast-path hook on Pod UpdatePhysical, a
// hook on Secret CreatePhysical (so SecretList is a batch) and one on the unknown kind Widget.
// Every hook call is counted in calls.
func inputRegistry(t *testing.T, calls *atomic.Int32) *engine.Registry {
	t.Helper()
	label := func(_ context.Context, o client.Object) (client.Object, error) {
		calls.Add(1)
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["synchook.io/checked"] = "yes"
		o.SetLabels(l)
		return o, nil
	}
	labelMeta := func(_ context.Context, m *hooks.Metadata) error {
		calls.Add(1)
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels["synchook.io/checked"] = "yes"
		return nil
	}
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(inputWidgetGVK)
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Keys: testKeeper(t), Undo: true})
	reg.MustRegister(
		podHook("typed-label", label),
		hooks.NewMetadataFunc("fast-label", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical}, label, labelMeta),
		hooks.NewFunc("secret", &corev1.Secret{}, []hooks.HookType{hooks.CreatePhysical}, label),
		hooks.NewFunc("widget", widget, []hooks.HookType{hooks.CreatePhysical}, label),
	)
	return reg
}

var (
	inputWidgetGVK     = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	inputSecretListGVK = corev1.SchemeGroupVersion.WithKind("SecretList")
)

func TestTenantInputIsRefused(t *testing.T) {
	cases := []struct {
		name string
		gvk  schema.GroupVersionKind
		typ  hooks.HookType
		raw  string
		want string // the error's text, whole
	}{
		{
			"a Secret sent as a Pod is refused naming both kinds", podGVK, hooks.CreatePhysical,
			`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"c2VjcmV0"}}`,
			`decode Pod object: object is v1/Secret but the request is for v1/Pod`,
		},
		{
			"a Secret sent as a Pod is refused on the label fast path too", podGVK, hooks.UpdatePhysical,
			`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"c2VjcmV0"}}`,
			`decode Pod object: object is v1/Secret but the request is for v1/Pod`,
		},
		{
			"a Secret sent as a Pod is refused on an undo read", podGVK, hooks.GetPhysical,
			`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"c2VjcmV0"}}`,
			`decode Pod object: object is v1/Secret but the request is for v1/Pod`,
		},
		{
			"an object with only another apiVersion is refused", podGVK, hooks.CreatePhysical,
			`{"apiVersion":"apps/v1","metadata":{"name":"p"}}`,
			`decode Pod object: object is apiVersion "apps/v1" but the request is for v1/Pod`,
		},
		{
			"a kind that is no string is refused", podGVK, hooks.UpdatePhysical,
			`{"apiVersion":"v1","kind":5,"metadata":{"name":"p"}}`,
			`decode Pod object: kind is 5, want a string`,
		},
		{
			"a Pod item inside a SecretList is refused naming the item", inputSecretListGVK, hooks.CreatePhysical,
			`{"apiVersion":"v1","kind":"SecretList","metadata":{},"items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"}}]}`,
			`SecretList items[0] (ns/p): decode Secret object: item is v1/Pod but the list is of v1/Secret`,
		},
		{
			"a PodList sent as a SecretList is refused", inputSecretListGVK, hooks.CreatePhysical,
			`{"apiVersion":"v1","kind":"PodList","items":[]}`,
			`decode SecretList object: object is v1/PodList but the request is for v1/SecretList`,
		},
		{
			"an item with labels twice is refused", inputSecretListGVK, hooks.CreatePhysical,
			`{"items":[{"metadata":{"name":"a","labels":{},"labels":{"x":"y"}}}]}`,
			`SecretList items[0] (a): decode Secret object: metadata: key "labels" appears more than once`,
		},
		{
			"labels twice in metadata are refused", podGVK, hooks.CreatePhysical,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"a":"1"},"name":"p","labels":{"b":"2"}}}`,
			`decode Pod object: metadata: key "labels" appears more than once`,
		},
		{
			"Labels in metadata is refused", podGVK, hooks.UpdatePhysical,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","Labels":{"tenant":"b"}}}`,
			`decode Pod object: metadata: key "Labels" differs only in case from "labels"`,
		},
		{
			"a Unicode case variant of labels is refused", podGVK, hooks.UpdatePhysical,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","label\u017f":{"tenant":"b"}}}`,
			`decode Pod object: metadata: key "labelſ" differs only in case from "labels"`,
		},
		{
			"two unknown metadata keys that differ only in case are refused", podGVK, hooks.CreatePhysical,
			`{"metadata":{"name":"p","extra":1,"EXTRA":2}}`,
			`decode Pod object: metadata: key "EXTRA" differs only in case from "extra"`,
		},
		{
			"Metadata at the top level is refused", podGVK, hooks.CreatePhysical,
			`{"apiVersion":"v1","kind":"Pod","Metadata":{"name":"p"}}`,
			`decode Pod object: key "Metadata" differs only in case from "metadata"`,
		},
		{
			"Spec at the top level of a typed kind is refused", podGVK, hooks.GetPhysical,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"Spec":{}}`,
			`decode Pod object: key "Spec" differs only in case from "spec"`,
		},
		{
			"metadata twice is refused", podGVK, hooks.UpdatePhysical,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"metadata":{"name":"q"}}`,
			`decode Pod object: key "metadata" appears more than once`,
		},
		{
			"kind twice is refused even when both are right", podGVK, hooks.CreatePhysical,
			`{"apiVersion":"v1","kind":"Pod","kind":"Pod","metadata":{"name":"p"}}`,
			`decode Pod object: key "kind" appears more than once`,
		},
		{
			"a repeated label key is refused", podGVK, hooks.UpdatePhysical,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"web","team":"a","app":"db"}}}`,
			`decode Pod object: metadata.labels: key "app" appears more than once`,
		},
		{
			"a repeated annotation key written with an escape is refused", podGVK, hooks.CreatePhysical,
			`{"metadata":{"name":"p","annotations":{"note":"1","\u006eote":"2"}}}`,
			`decode Pod object: metadata.annotations: key "note" appears more than once`,
		},
		{
			"case variants at the top of a kind the scheme does not know are refused", inputWidgetGVK, hooks.CreatePhysical,
			`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{},"Spec":{"x":1}}`,
			`decode Widget object: key "Spec" differs only in case from "spec"`,
		},
		{
			"a Widget of another group is refused", inputWidgetGVK, hooks.CreatePhysical,
			`{"apiVersion":"other.com/v1","kind":"Widget","metadata":{"name":"w"}}`,
			`decode Widget object: object is other.com/v1/Widget but the request is for example.com/v1/Widget`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			captured := 0
			runner := engine.NewRunner(inputRegistry(t, &calls), engine.RunnerOptions{
				Capture: func(hooks.HookType, schema.GroupVersionKind, []byte, engine.Result, error) { captured++ },
			})
			for _, mutate := range []struct {
				name string
				fn   func(context.Context, schema.GroupVersionKind, hooks.HookType, []byte) (engine.Result, error)
			}{{"Mutate", runner.Mutate}, {"MutateValidJSON", runner.MutateValidJSON}, {"Registry.Mutate", runner.Registry().Mutate}} {
				res, err := mutate.fn(t.Context(), tc.gvk, tc.typ, []byte(tc.raw))
				var inputErr *intake.InputError
				if !errors.As(err, &inputErr) || res.Patch != nil {
					t.Fatalf("%s: %s, %v; want an InputError", mutate.name, res.Patch, err)
				}
				if err.Error() != tc.want {
					t.Errorf("%s: error\n %s\nwant\n %s", mutate.name, err, tc.want)
				}
				if code := webhook.StatusCode(err); code != 400 {
					t.Errorf("%s: StatusCode %d, want 400", mutate.name, code)
				}
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("%d hook calls, want none", n)
			}
			if captured != 0 {
				t.Errorf("captured %d times, want never: the object's kind is in doubt", captured)
			}
		})
	}
}

func TestTenantInputThatReadsAlikeIsAccepted(t *testing.T) {
	cases := []struct {
		name string
		gvk  schema.GroupVersionKind
		typ  hooks.HookType
		raw  string
	}{
		{"an object without apiVersion and kind is handled as the request's kind", podGVK, hooks.CreatePhysical, `{"metadata":{"name":"p"}}`},
		{"an object without apiVersion and kind goes through the fast path", podGVK, hooks.UpdatePhysical, `{"metadata":{"name":"p"}}`},
		{"null and empty apiVersion and kind count as absent", podGVK, hooks.UpdatePhysical, `{"apiVersion":null,"kind":"","metadata":{"name":"p"}}`},
		{"only a matching kind is enough", podGVK, hooks.CreatePhysical, `{"kind":"Pod","metadata":{"name":"p"}}`},
		{"label keys that differ only in case are distinct keys", podGVK, hooks.UpdatePhysical, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"App":"1","app":"2","APP":"3"}}}`},
		{"annotation keys that differ only in case are distinct keys", podGVK, hooks.CreatePhysical, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"Note":"1","note":"2"}}}`},
		{"the same name at two levels is no repeat", podGVK, hooks.CreatePhysical, `{"apiVersion":"v1","kind":"Pod","name":"x","metadata":{"name":"p","labels":{"name":"n"}}}`},
		{"a field the types do not know keeps working", podGVK, hooks.CreatePhysical, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","newMeta":1},"future":{}}`},
		{"list items without apiVersion and kind are items of the list's kind", inputSecretListGVK, hooks.CreatePhysical, `{"apiVersion":"v1","kind":"SecretList","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}},{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b"}}]}`},
		{"a Widget with unknown fields is a Widget", inputWidgetGVK, hooks.CreatePhysical, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"Spec":1,"spec":2}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			runner := engine.NewRunner(inputRegistry(t, &calls), engine.RunnerOptions{})
			res, err := runner.Mutate(t.Context(), tc.gvk, tc.typ, []byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			out, err := res.Object()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), `"synchook.io/checked":"yes"`) {
				t.Errorf("the hook's label is missing: %s", out)
			}
		})
	}
	t.Run("an object of a kind without a chain is not checked", func(t *testing.T) {
		var calls atomic.Int32
		reg := inputRegistry(t, &calls)
		cm := corev1.SchemeGroupVersion.WithKind("ConfigMap")
		res, err := reg.Mutate(t.Context(), cm, hooks.CreatePhysical, []byte(`{"kind":"Secret","kind":"Secret"}`))
		if err != nil || res.Patch != nil {
			t.Errorf("%s, %v; want nothing to do", res.Patch, err)
		}
	})
	t.Run("invalid JSON is still a plain decode error naming the syntax", func(t *testing.T) {
		var calls atomic.Int32
		_, err := inputRegistry(t, &calls).Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(`{"kind":"Secret","kind":`))
		var decodeErr *failure.DecodeError
		if !errors.As(err, &decodeErr) || errors.As(err, new(*intake.InputError)) {
			t.Errorf("error %v; want a DecodeError without an InputError", err)
		}
	})
}

// TestCaseVariantsAreWhatEncodingJSONReads shows why case variants are refused: vcluster decodes
// a plugin's answer with encoding/json, which takes "Labels" and "labelſ" for labels and keeps
// the last of repeated keys, while synchook's decoder is case-sensitive.
func TestCaseVariantsAreWhatEncodingJSONReads(t *testing.T) {
	for _, raw := range []string{
		`{"metadata":{"labels":{"a":"1"},"Labels":{"tenant":"b"}}}`,
		`{"metadata":{"labels":{"a":"1"},"label\u017f":{"tenant":"b"}}}`,
		`{"metadata":{"labels":{"a":"1"}},"Metadata":{"labels":{"tenant":"b"}}}`,
	} {
		var pod corev1.Pod
		if err := json.Unmarshal([]byte(raw), &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Labels["tenant"] != "b" {
			t.Fatalf("encoding/json read %s as labels %v: the premise changed", raw, pod.Labels)
		}
		var calls atomic.Int32
		if _, err := inputRegistry(t, &calls).Mutate(t.Context(), podGVK, hooks.UpdatePhysical, []byte(raw)); !errors.As(err, new(*intake.InputError)) {
			t.Errorf("%s: error %v, want an InputError", raw, err)
		}
	}
}

// TestManyKeysAreCheckedAlike checks the input check past its small-object fast path: objects
// with more members than it compares pairwise.
func TestManyKeysAreCheckedAlike(t *testing.T) {
	many := func(prefix string, n int, last string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(`"` + prefix + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":"v",`)
		}
		return b.String() + last
	}
	cases := []struct {
		name, raw, want string
	}{
		{"a label repeated after 40 others", `{"metadata":{"labels":{` + many("k", 40, `"ka":"x","kaa":"y"`) + `}}}`, `decode Pod object: metadata.labels: key "kaa" appears more than once`},
		{"a metadata case variant after 40 unknown keys", `{"metadata":{` + many("x", 40, `"q":1,"Q":2`) + `}}`, `decode Pod object: metadata: key "Q" differs only in case from "q"`},
		{"a top-level key repeated after 40 others", `{` + many("y", 40, `"yaa":1`) + `}`, `decode Pod object: key "yaa" appears more than once`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			_, err := inputRegistry(t, &calls).Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(tc.raw))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
	t.Run("40 distinct labels pass", func(t *testing.T) {
		var calls atomic.Int32
		raw := `{"metadata":{"labels":{` + many("k", 40, `"last":"x"`) + `}}}`
		res, err := inputRegistry(t, &calls).Mutate(t.Context(), podGVK, hooks.CreatePhysical, []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := patch.Apply([]byte(raw), res.Patch); err != nil {
			t.Fatal(err)
		}
	})
}
