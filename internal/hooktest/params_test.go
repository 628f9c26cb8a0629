package hooktest_test

import (
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/hooktest"
)

// tierConfig labels a pod tier=params.data.tier from the ConfigMap "tier" of the pod's
// namespace (the paramRef's namespace defaults to the request's); none found: Allow, unchanged.
const tierConfig = `
hooks:
  - name: tier
    types: [CreatePhysical]
    policy:
      apiVersion: admissionregistration.k8s.io/v1
      kind: MutatingAdmissionPolicy
      metadata: {name: tier}
      spec:
        paramKind: {apiVersion: v1, kind: ConfigMap}
        matchConstraints:
          resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
        mutations:
          - patchType: JSONPatch
            jsonPatch:
              expression: "[JSONPatch{op: 'add', path: '/metadata/labels/tier', value: params.data.tier}]"
    bindings:
      - apiVersion: admissionregistration.k8s.io/v1
        kind: MutatingAdmissionPolicyBinding
        metadata: {name: tier}
        spec: {policyName: tier, paramRef: {name: tier}}
`

const tierParam = `
apiVersion: v1
kind: ConfigMap
metadata: {name: tier, namespace: ns}
data: {tier: gold}
`

// TestATestFileGivesTheParamsOfThePolicies: a test file's params: are the params the cluster
// holds, for every policy entry of its config, after the entry's own: inline or a file; the
// cases (and their round trips) and the load-time idempotency self-test run with them.
func TestATestFileGivesTheParamsOfThePolicies(t *testing.T) {
	const test = `
config: config.yaml
params:
%s
cases:
  - name: the pod gets the tier of its namespace's param
    object: pod.yaml
    expect: {match: subset, object: {metadata: {labels: {app: web, tier: gold}}}}
`
	for _, tc := range []struct {
		name, params, config string
		code                 int
		want                 string // in stdout (ExitOK, ExitFailed) or stderr (ExitInvalid)
	}{
		{name: "an inline param is selected", params: "  - {apiVersion: v1, kind: ConfigMap, metadata: {name: tier, namespace: ns}, data: {tier: gold}}", config: tierConfig, code: hooktest.ExitOK, want: "ok\t1 cases in 1 files"},
		{name: "a param in a file is selected", params: "  - tier.yaml", config: tierConfig, code: hooktest.ExitOK, want: "ok\t1 cases in 1 files"},
		{name: "without the param the case fails", params: "  - {apiVersion: v1, kind: ConfigMap, metadata: {name: tier, namespace: other}, data: {tier: gold}}", config: tierConfig, code: hooktest.ExitFailed, want: "-    tier: gold"},
		{name: "a param without a name is named in the config's error", params: "  - {apiVersion: v1, kind: ConfigMap, metadata: {namespace: ns}}", config: tierConfig, code: hooktest.ExitInvalid, want: "the test file's params[0]: invalid MutatingAdmissionPolicy: metadata.name: Required value"},
		{name: "a param that is not an object is refused", params: "  - [a]", config: tierConfig, code: hooktest.ExitInvalid, want: "params[0]: not an object"},
		{name: "params with no policy entry are refused", params: "  - tier.yaml", config: labelsConfig, code: hooktest.ExitInvalid, want: "params: the config has no policy entry (policy: or policyFile:) to give them to"},
		{
			name: "the idempotency self-test runs with them", params: "  - {apiVersion: v1, kind: ConfigMap, metadata: {name: tier, namespace: default}, data: {tier: gold}}",
			config: strings.Replace(tierConfig, "value: params.data.tier}]", "value: (has(object.metadata.labels) && 'tier' in object.metadata.labels ? object.metadata.labels['tier'] : '') + params.data.tier}]", 1),
			code:   hooktest.ExitInvalid, want: "is not idempotent",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dir(t, map[string]string{"config.yaml": tc.config, "pod.yaml": pod, "tier.yaml": tierParam, hooktest.FileName: strings.Replace(test, "%s", tc.params, 1)})
			code, out, errOut := run(t, d, hooktest.Options{}, false)
			got := out
			if tc.code == hooktest.ExitInvalid {
				got = errOut + out
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}

// TestATestFileGivesTheBindingsOfThePolicies: a test file's bindings: are the bindings the
// cluster holds: each goes to the policy entry whose policy it names, after the entry's own.
func TestATestFileGivesTheBindingsOfThePolicies(t *testing.T) {
	unbound := tierConfig[:strings.Index(tierConfig, "    bindings:")]
	const binding = "{apiVersion: admissionregistration.k8s.io/v1, kind: MutatingAdmissionPolicyBinding, metadata: {name: tier}, spec: {policyName: %s, paramRef: {name: tier}}}"
	const test = `
config: config.yaml
params: [tier.yaml]
bindings:
%s
cases:
  - name: the pod gets the tier of its namespace's param
    object: pod.yaml
    expect: {match: subset, object: {metadata: {labels: {app: web, tier: gold}}}}
`
	for _, tc := range []struct {
		name, bindings string
		code           int
		want           string
	}{
		{name: "an inline binding binds the policy it names", bindings: "  - " + strings.Replace(binding, "%s", "tier", 1), code: hooktest.ExitOK, want: "ok\t1 cases in 1 files"},
		{name: "a binding in a file binds the policy it names", bindings: "  - binding.yaml", code: hooktest.ExitOK, want: "ok\t1 cases in 1 files"},
		{name: "a binding naming no policy of the config is refused", bindings: "  - " + strings.Replace(binding, "%s", "other", 1), code: hooktest.ExitInvalid, want: `hooks: Invalid value: "other": the test file's bindings[0]: spec.policyName names no policy of the config's policy entries`},
		{name: "without a binding the policy runs once with params null and fails", bindings: "  []", code: hooktest.ExitFailed, want: "no such key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dir(t, map[string]string{
				"config.yaml": unbound, "pod.yaml": pod, "tier.yaml": tierParam, "binding.yaml": strings.Replace(binding, "%s", "tier", 1),
				hooktest.FileName: strings.Replace(test, "%s", tc.bindings, 1),
			})
			code, out, errOut := run(t, d, hooktest.Options{}, false)
			got := out
			if tc.code == hooktest.ExitInvalid {
				got = errOut + out
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}
