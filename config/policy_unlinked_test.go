package config

import (
	"errors"
	"testing"

	"github.com/synchook/synchook/internal/policyreg"
)

// withoutPolicies unregisters the policy compiler for the test, as in a binary that does not
// import config/policy (this test binary does, for config_test's policy tests).
func withoutPolicies(t *testing.T) {
	prev := policyreg.Lookup()
	policyreg.Register(nil)
	t.Cleanup(func() { policyreg.Register(prev) })
}

func TestPolicyHooksNotLinkedAreRefusedNamingThePackage(t *testing.T) {
	withoutPolicies(t)
	const policy = `
    policy:
      apiVersion: admissionregistration.k8s.io/v1
      kind: MutatingAdmissionPolicy
      metadata: {name: p}
      spec: {}`
	cases := []struct{ name, config, want string }{
		{
			"inline, no resources", "hooks:\n  - types: [CreatePhysical]" + policy,
			"hooks[0].policy: Forbidden: " + notLinked,
		},
		{
			"a file, with resources", "hooks:\n  - types: [CreatePhysical]\n    resources: [{apiVersion: v1, kind: Pod}]\n    policyFile: /nonexistent.yaml",
			"hooks[0].policyFile: Forbidden: " + notLinked,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.config))
			if !errors.Is(err, ErrInvalid) || err.Error() != ErrInvalid.Error()+": "+tc.want {
				t.Errorf("error %v\nwant ErrInvalid with %s", err, tc.want)
			}
		})
	}
}

func TestConfigWithoutPolicyHooksNeedsNoCompiler(t *testing.T) {
	withoutPolicies(t)
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default: %v", err)
	}
}
