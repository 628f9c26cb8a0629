// Command pod-hook is synchook with one Go hook: it labels every pod vcluster creates in the
// host cluster. It needs no GetPhysical hook to take the label off again: synchook's automatic
// undo records the change in the synchook.io/undo annotation and gives the syncer back the pod
// it sent when it reads the host pod, so the syncer never sees a difference. Build and try it:
//
//	go build -o pod-hook . && ./pod-hook mutate --type CreatePhysical -f ../pod.yaml -o yaml > /tmp/hooked.yaml
//	./pod-hook mutate --type GetPhysical -f /tmp/hooked.yaml -o yaml   # ../pod.yaml again
package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/plugin"
)

// TenantLabel is the label the hook puts on host pods.
const TenantLabel = "example.com/tenant"

// PodHook labels pods on their way to the host; automatic undo unlabels them on the way back.
type PodHook struct{ Tenant string }

// Name is the hook's name in logs, metrics and errors.
func (h *PodHook) Name() string { return "pod-tenant-label" }

// Resource is the kind the hook runs on.
func (h *PodHook) Resource() client.Object { return &corev1.Pod{} }

var _ plugin.MutateCreatePhysical = &PodHook{}

// MutateCreatePhysical adds the tenant label before vcluster creates the host pod.
func (h *PodHook) MutateCreatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("object %T is not a pod", obj)
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[TenantLabel] = h.Tenant
	return pod, nil
}

func main() {
	plugin.MustInit()
	plugin.MustRegister(&PodHook{Tenant: "team-a"})
	plugin.MustStart()
}
