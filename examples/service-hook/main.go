// Command service-hook is synchook with a Go hook on services: host services vcluster creates
// or updates get an annotation that a host load-balancer controller reads (here: an internal
// load balancer), and a node port the tenant asked for is dropped on the way down.
//
//	go build -o service-hook . && ./service-hook mutate --type CreatePhysical -f service.yaml
package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/plugin"
)

// InternalLBAnnotation is the annotation set on every host service.
const InternalLBAnnotation = "service.beta.kubernetes.io/internal-load-balancer"

// ServiceHook makes host services internal and clears node ports on the way down.
var ServiceHook = hooks.Typed("service-internal-lb", []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical},
	func(_ context.Context, svc *corev1.Service) error {
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[InternalLBAnnotation] = "true"
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
		return nil
	})

func main() {
	plugin.MustInit()
	plugin.MustRegister(ServiceHook)
	plugin.MustStart()
}
