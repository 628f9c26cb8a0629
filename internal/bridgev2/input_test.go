package bridgev2_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
)

// TestMutateRefusesAmbiguousObjects: over a real go-plugin connection, an object of another
// kind than the request, or with keys that vcluster's encoding/json decode reads otherwise
// than synchook, is InvalidArgument with the engine's message (the message every transport
// gives), never an answer that vcluster would read differently from the patch.
func TestMutateRefusesAmbiguousObjects(t *testing.T) {
	pc := dispense(t, testRegistry(t))
	cases := []struct {
		name, object, want string
	}{
		{
			"a Secret sent as a Pod is InvalidArgument naming both kinds", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"p"},"data":{"k":"c2VjcmV0"}}`,
			`synchook: decode Pod object: object is v1/Secret but the request is for v1/Pod`,
		},
		{
			"Labels in metadata is InvalidArgument naming the key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","Labels":{"host-only":"x"}}}`,
			`synchook: decode Pod object: metadata: key "Labels" differs only in case from "labels"`,
		},
		{
			"labels twice is InvalidArgument naming the key", `{"metadata":{"name":"p","labels":{"app":"web"},"labels":{"host-only":"x"}}}`,
			`synchook: decode Pod object: metadata: key "labels" appears more than once`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := pc.Mutate(t.Context(), &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: tc.object})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != tc.want || res != nil {
				t.Errorf("answer %v, error %v; want InvalidArgument %s", res, err, tc.want)
			}
		})
	}
}
