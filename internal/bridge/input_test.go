package bridge_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/engine"
)

// TestMutateRefusesAmbiguousObjects: an object of another kind than the request, or with keys
// that vcluster's encoding/json decode reads otherwise than synchook, is InvalidArgument with
// the engine's message (the message every transport gives).
func TestMutateRefusesAmbiguousObjects(t *testing.T) {
	br, err := bridge.New(engine.NewRunner(testRegistry(t), engine.RunnerOptions{}), bridge.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, object, want string
	}{
		{
			"a Secret sent as a Pod is InvalidArgument naming both kinds", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"p"},"data":{"k":"c2VjcmV0"}}`,
			`synchook: decode Pod object: object is v1/Secret but the request is for v1/Pod`,
		},
		{
			"Labels in metadata is InvalidArgument naming the key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","Labels":{"a":"b"}}}`,
			`synchook: decode Pod object: metadata: key "Labels" differs only in case from "labels"`,
		},
		{
			"labels twice is InvalidArgument naming the key", `{"metadata":{"name":"p","labels":{"a":"1"},"labels":{"b":"2"}}}`,
			`synchook: decode Pod object: metadata: key "labels" appears more than once`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := br.Mutate(t.Context(), &remote.MutateRequest{ApiVersion: "v1", Kind: "Pod", Type: "CreatePhysical", Object: tc.object})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != tc.want || res != nil {
				t.Errorf("answer %v, error %v; want InvalidArgument %s", res, err, tc.want)
			}
		})
	}
}
