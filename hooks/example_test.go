package hooks_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
)

// A hook written against the Pod type: no client.Object in its signature, no type assertion.
// A program registers it with plugin.MustRegister; here it is called as the engine calls it.
func ExampleTyped() {
	hook := hooks.Typed("tenant-label", []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical},
		func(_ context.Context, pod *corev1.Pod) error {
			if pod.Spec.NodeName != "" {
				return fmt.Errorf("pod %s is already scheduled", pod.Name)
			}
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels["example.com/tenant"] = "team-a"
			return nil
		})
	fmt.Printf("%s runs on %T\n", hook.Name(), hook.Resource())

	pod := &corev1.Pod{}
	pod.Name = "web"
	out, err := hook.MutateFuncs()[hooks.CreatePhysical](context.Background(), pod)
	fmt.Println(out.GetLabels(), err)

	pod.Spec.NodeName = "node-1"
	_, err = hook.MutateFuncs()[hooks.UpdatePhysical](context.Background(), pod)
	fmt.Println(err)
	// Output:
	// tenant-label runs on *v1.Pod
	// map[example.com/tenant:team-a] <nil>
	// pod web is already scheduled
}
