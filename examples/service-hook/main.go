// Command service-hook is synchook with a Go hook on services: host services vcluster creates
// or updates get an annotation that a host load-balancer controller reads (here: an internal
// load balancer), and a node port the tenant asked for is dropped on the way down.
//
//	go build -o service-hook . && ./service-hook mutate --type CreatePhysical -f service.yaml
package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/plugin"
)

// InternalLBAnnotation is the annotation set on every host service.
const InternalLBAnnotation = "service.beta.kubernetes.io/internal-load-balancer"

// ServiceHook makes host services internal and clears node ports on the way down.
type ServiceHook struct{}

// Name is the hook's name in logs, metrics and errors.
func (ServiceHook) Name() string { return "service-internal-lb" }

// Resource is the kind the hook runs on.
func (ServiceHook) Resource() client.Object { return &corev1.Service{} }

func (ServiceHook) mutate(obj client.Object) (client.Object, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("object %T is not a service", obj)
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[InternalLBAnnotation] = "true"
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].NodePort = 0
	}
	return svc, nil
}

// MutateCreatePhysical runs before vcluster creates the host service.
func (h ServiceHook) MutateCreatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return h.mutate(obj)
}

// MutateUpdatePhysical runs before vcluster updates the host service.
func (h ServiceHook) MutateUpdatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return h.mutate(obj)
}

func main() {
	plugin.MustInit()
	plugin.MustRegister(ServiceHook{})
	plugin.MustStart()
}
