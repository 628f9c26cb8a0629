package policy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policy"
	"github.com/synchook/synchook/internal/policyreg"
)

// fakeSource is a ParamSource over a fixed list of namespaced objects, or failing with err.
type fakeSource struct {
	objs []*unstructured.Unstructured
	err  error
}

func (f fakeSource) Namespaced(context.Context, schema.GroupVersionKind) (bool, error) {
	return true, f.err
}

func (f fakeSource) Get(_ context.Context, _ schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	for _, o := range f.objs {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o, f.err
		}
	}
	return nil, f.err
}

func (f fakeSource) List(_ context.Context, _ schema.GroupVersionKind, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range f.objs {
		if o.GetNamespace() == namespace && sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, f.err
}

func TestParamsFromAParamSource(t *testing.T) {
	host := []*unstructured.Unstructured{
		configMap("platform", "b", map[string]string{"role": "tolerations"}, map[string]any{"v": "host/b"}),
		configMap("platform", "a", map[string]string{"role": "tolerations"}, map[string]any{"v": "host/a"}),
	}
	inConfig := []*unstructured.Unstructured{configMap("platform", "a", map[string]string{"role": "tolerations"}, map[string]any{"v": "config/a"})}
	byName := &admissionregistrationv1.ParamRef{Name: "b", Namespace: "platform", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
	bySelector := &admissionregistrationv1.ParamRef{Namespace: "platform", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "tolerations"}}}
	cases := []struct {
		name       string
		failure    string
		ref        *admissionregistrationv1.ParamRef
		params     []*unstructured.Unstructured // the config's
		source     policy.ParamSource
		configOnly bool // the request's ctx is policyreg.ConfigParamsOnly
		want       string
		wantErr    string
	}{
		{name: "a paramRef by name finds the source's param", failure: "Fail", ref: byName, source: fakeSource{objs: host}, want: "host/b,"},
		{name: "a selector merges the config's and the source's params by name, the config's first of a name", failure: "Fail", ref: bySelector, params: inConfig, source: fakeSource{objs: host}, want: "config/a,host/b,"},
		{name: "the load-time self-test sees the config's params only", failure: "Fail", ref: bySelector, params: inConfig, source: fakeSource{objs: host}, configOnly: true, want: "config/a,"},
		{name: "a failing source is a configuration error that Fail turns into a failed request", failure: "Fail", ref: byName, source: fakeSource{err: errors.New("not synced")}, wantErr: "not synced"},
		{name: "a failing source is skipped under Ignore", failure: "Ignore", ref: byName, source: fakeSource{err: errors.New("not synced")}, want: ""},
		{name: "Deny with no param in the source is a configuration error", failure: "Fail", ref: byName, source: fakeSource{}, wantErr: "parameterNotFoundAction Deny"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse(fmt.Appendf(nil, paramsPolicy, tc.failure))
			if err != nil {
				t.Fatal(err)
			}
			c, err := policy.CompileWithOptions(p, policy.Options{
				Bindings:    []admissionregistrationv1.MutatingAdmissionPolicyBinding{bindingOf("b", "p", tc.ref)},
				Params:      tc.params,
				ParamSource: tc.source,
			})
			if err != nil {
				t.Fatal(err)
			}
			fn, err := c.MutateFunc(hooks.CreatePhysical)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tc.configOnly {
				ctx = policyreg.ConfigParamsOnly(ctx)
			}
			pod := &corev1.Pod{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant"},
			}
			out, err := fn(ctx, pod)
			if tc.wantErr != "" {
				if !errors.Is(err, policy.ErrParamConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrParamConfig with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out.GetAnnotations()["seen"]; got != tc.want {
				t.Errorf("seen = %q, want %q", got, tc.want)
			}
		})
	}
}
