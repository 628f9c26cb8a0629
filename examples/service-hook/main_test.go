package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/hooks/hookstest"
)

func TestServiceHookMakesHostServicesInternalWithoutNodePorts(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}},
	}
	for _, typ := range []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical} {
		written := hookstest.RoundTrip(t, ServiceHook, typ, svc)
		if written.Annotations[InternalLBAnnotation] != "true" || written.Spec.Ports[0].NodePort != 0 {
			t.Errorf("%s: annotations %v, node port %d; want internal and no node port", typ, written.Annotations, written.Spec.Ports[0].NodePort)
		}
	}
}
