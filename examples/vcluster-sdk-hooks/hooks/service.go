package hooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/plugin"
)

// NewServiceHook returns the hook that changes the port of host services and changes it back
// when vcluster reads them, so the virtual service keeps the port the tenant gave it.
func NewServiceHook() plugin.ClientHook { return &serviceHook{} }

type serviceHook struct{}

func (s *serviceHook) Name() string { return "service-hook" }

func (s *serviceHook) Resource() client.Object { return &corev1.Service{} }

var (
	_ plugin.MutateCreatePhysical = &serviceHook{}
	_ plugin.MutateUpdatePhysical = &serviceHook{}
	_ plugin.MutateGetPhysical    = &serviceHook{}
)

func (s *serviceHook) MutateCreatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return movePort(obj, 80, 8080)
}

func (s *serviceHook) MutateUpdatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return movePort(obj, 80, 8080)
}

func (s *serviceHook) MutateGetPhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return movePort(obj, 8080, 80)
}

// movePort changes every service port from to to.
func movePort(obj client.Object, from, to int32) (client.Object, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("object %T is not a service", obj)
	}
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == from {
			svc.Spec.Ports[i].Port = to
		}
	}
	return svc, nil
}
