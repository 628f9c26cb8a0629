package config_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/policyreg"
)

// hostParamsEntry is a policy entry that sets label pool from its param's data.pool, bound by
// name to the param "pool" in the request's namespace.
const hostParamsEntry = `
hooks:
  - name: pool
    types: [CreatePhysical]
    policy:
      apiVersion: admissionregistration.k8s.io/v1
      kind: MutatingAdmissionPolicy
      metadata: {name: pool}
      spec:
        paramKind: {apiVersion: v1, kind: ConfigMap}
        matchConstraints:
          resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
        mutations:
          - patchType: ApplyConfiguration
            applyConfiguration:
              expression: "Object{metadata: Object.metadata{labels: {'pool': params.data['pool']}}}"
    bindings:
      - apiVersion: admissionregistration.k8s.io/v1
        kind: MutatingAdmissionPolicyBinding
        metadata: {name: pool}
        spec: {policyName: pool, paramRef: {name: pool, parameterNotFoundAction: Allow}}
`

// recordingHost is a policyreg.HostParams whose sources hold one param, platform/pool, and
// that records the namespaces each In was given.
type recordingHost struct{ in [][]string }

func (r *recordingHost) In(namespaces []string) policyreg.ParamSource {
	r.in = append(r.in, namespaces)
	return onePool{}
}

type onePool struct{}

func (onePool) Namespaced(context.Context, schema.GroupVersionKind) (bool, error) { return true, nil }

func (onePool) Get(_ context.Context, _ schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if namespace != "platform" || name != "pool" {
		return nil, nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"pool": "host"}}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u, nil
}

func (onePool) List(context.Context, schema.GroupVersionKind, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	return nil, nil
}

func TestHostParamsReachThePolicyOfTheEntryThatAsksForThem(t *testing.T) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"platform"},"spec":{"containers":[{"name":"c","image":"i"}]}}`
	for _, tc := range []struct {
		name       string
		yaml       string
		host       bool
		wantIn     [][]string
		wantPatch  bool
		wantNoHost bool
	}{
		{name: "an entry with hostParams reads the host's params in its namespaces", yaml: hostParamsEntry + "    hostParams: {namespaces: [platform, shared]}\n", host: true, wantIn: [][]string{{"platform", "shared"}}, wantPatch: true},
		{name: "an entry without hostParams never asks the host", yaml: hostParamsEntry, host: true},
		{name: "a program without a host (synchook test, mutate) uses the config's params only", yaml: hostParamsEntry + "    hostParams: {namespaces: [platform]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var o config.BuildOptions
			rec := &recordingHost{}
			if tc.host {
				o.HostParams = rec
			}
			reg := engine.NewRegistry(nil)
			if err := cfg.BuildWith(reg, o); err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(rec.in, tc.wantIn, slices.Equal) {
				t.Errorf("In called with %v, want %v", rec.in, tc.wantIn)
			}
			res, err := reg.Mutate(t.Context(), schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, hooks.CreatePhysical, []byte(pod))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(res.Patch), `"host"`); got != tc.wantPatch {
				t.Errorf("patch %s: the host's param used = %v, want %v", res.Patch, got, tc.wantPatch)
			}
		})
	}
}

func TestHostParamsIsCheckedAtLoad(t *testing.T) {
	labelsEntry := "\n  - name: l\n    types: [CreatePhysical]\n    resources: [{apiVersion: v1, kind: Pod}]\n    labels: {labels: {a: b}}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{name: "hostParams on an entry without a policy is refused", yaml: hostParamsEntry + labelsEntry + "    hostParams: {namespaces: [platform]}\n", want: "hooks[1].hostParams: Forbidden: hostParams is only for a policy or policyFile entry"},
		{name: "hostParams without namespaces is refused", yaml: hostParamsEntry + "    hostParams: {namespaces: []}\n", want: "hooks[0].hostParams.namespaces: Required value"},
		{name: "a namespace that is no namespace name is named", yaml: hostParamsEntry + "    hostParams: {namespaces: [Platform_A]}\n", want: `hooks[0].hostParams.namespaces[0]: Invalid value: "Platform_A"`},
		{name: "a namespace given twice is named", yaml: hostParamsEntry + "    hostParams: {namespaces: [platform, platform]}\n", want: `hooks[0].hostParams.namespaces[1]: Duplicate value: "platform"`},
		{name: "an unknown key of hostParams is named", yaml: hostParamsEntry + "    hostParams: {namespaces: [platform], selector: {}}\n", want: `hooks[0].hostParams: unknown field "selector"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
}
