package policy_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/policy"
)

// benchPolicy has three mutations: a label (ApplyConfiguration), an env var in every container
// (ApplyConfiguration, list maps) and an annotation (JSONPatch), behind one matchCondition and
// one variable.
const benchPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: bench
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [pods]
  variables:
    - name: team
      expression: object.metadata.namespace + "-team"
  matchConditions:
    - name: not-kube-system
      expression: object.metadata.namespace != "kube-system"
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"synchook.io/team": variables.team}}}'
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{spec: Object.spec{containers: object.spec.containers.map(c,
            Object.spec.containers{name: c.name, env: [Object.spec.containers.env{name: "TZ", value: "UTC"}]})}}
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "add", path: "/metadata/annotations/synchook.io~1policy", value: "bench"}]'
`

// BenchmarkPolicy runs the 3-mutation policy on the ~5 KiB fixture Pod (decode, MutateFunc,
// encode, like a hook in the chain), next to the typed decode + encode floor of the same
// object (hooks' BenchmarkFloorDecodeEncode).
func BenchmarkPolicy(b *testing.B) {
	raw := fixtures.JSON(fixtures.Pod("ns", "web"))
	b.Run("floor", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			pod := &corev1.Pod{}
			if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(pod); err != nil {
				b.Fatal(err)
			}
		}
	})
	m, err := policy.Parse([]byte(benchPolicy))
	if err != nil {
		b.Fatal(err)
	}
	p, err := policy.Compile(m, nil)
	if err != nil {
		b.Fatal(err)
	}
	fn, err := p.MutateFunc(hooks.CreatePhysical)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("policy=3-mutations", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			pod := &corev1.Pod{}
			if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
				b.Fatal(err)
			}
			out, err := fn(b.Context(), pod)
			if err != nil {
				b.Fatal(err)
			}
			if out.GetLabels()["synchook.io/team"] != "ns-team" {
				b.Fatal("not mutated")
			}
			if _, err := json.Marshal(out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCompile measures Parse + Compile of the 3-mutation policy (the type converter is
// built once per process, before the loop).
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		m, err := policy.Parse([]byte(benchPolicy))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := policy.Compile(m, nil); err != nil {
			b.Fatal(err)
		}
	}
}
