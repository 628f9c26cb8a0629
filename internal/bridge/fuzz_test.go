package bridge_test

import (
	"context"
	"encoding/json"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridge"
	"github.com/synchook/synchook/internal/bridge/remote"
	"github.com/synchook/synchook/internal/engine"
)

// FuzzMutate calls Mutate with arbitrary input (apiVersion, kind, object JSON, hook type). It
// must never panic; an error must be a gRPC status with a code of bridge.StatusCode's table;
// a mutated answer must decode into a Pod the way vcluster decodes it.
func FuzzMutate(f *testing.F) {
	f.Add("v1", "Pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}}}`, "CreatePhysical")
	f.Add("v1", "Pod", `{"metadata":{"labels":null,"annotations":{"x":"y"}},"spec":{"containers":[{"name":"c"}]}}`, "GetPhysical")
	f.Add("v1", "Pod", `{`, "CreatePhysical")
	f.Add("", "", `null`, "ApplyPhysical")
	f.Add("apps/v1", "Deployment", `{}`, "CreatePhysical")
	f.Add("v1", "Pod", `{"kind":"Secret","metadata":{"Labels":{},"labels":{"a":"1","a":"2"}}}`, "CreatePhysical")
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		podFunc("label", hooks.CreatePhysical, func(_ context.Context, p *corev1.Pod) error {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels["synchook.io/fuzz"] = "true"
			return nil
		}),
		podFunc("strip", hooks.GetPhysical, func(_ context.Context, p *corev1.Pod) error {
			delete(p.Annotations, "x")
			p.Spec.NodeName = ""
			return nil
		}),
	)
	b, err := bridge.New(engine.NewRunner(reg, engine.RunnerOptions{}), bridge.Options{Address: "127.0.0.1:0"})
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[codes.Code]bool{
		codes.InvalidArgument: true, codes.PermissionDenied: true, codes.FailedPrecondition: true,
		codes.Internal: true, codes.DeadlineExceeded: true, codes.ResourceExhausted: true,
	}
	f.Fuzz(func(t *testing.T, apiVersion, kind, object, typ string) {
		res, err := b.Mutate(context.Background(), &remote.MutateRequest{ApiVersion: apiVersion, Kind: kind, Object: object, Type: typ})
		if err != nil {
			st, ok := status.FromError(err)
			if !ok || !allowed[st.Code()] {
				t.Fatalf("error %v is not a gRPC status of the table", err)
			}
			return
		}
		if !res.Mutated {
			if res.Object != "" {
				t.Fatalf("mutated=false with an object")
			}
			return
		}
		var pod corev1.Pod
		if json.Unmarshal([]byte(object), &pod) != nil {
			return // vcluster could not have decoded the request either
		}
		if err := json.Unmarshal([]byte(res.Object), &pod); err != nil {
			t.Fatalf("answer does not decode into the request object: %v", err)
		}
	})
}
