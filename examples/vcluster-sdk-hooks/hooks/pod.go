// Package hooks holds the three hooks of the vcluster-sdk hooks example, written against
// synchook's plugin package.
package hooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/plugin"
)

// NewPodHook returns the hook that marks every host pod as created by this plugin.
func NewPodHook() plugin.ClientHook { return &podHook{} }

type podHook struct{}

func (p *podHook) Name() string { return "pod-hook" }

func (p *podHook) Resource() client.Object { return &corev1.Pod{} }

var (
	_ plugin.MutateCreatePhysical = &podHook{}
	_ plugin.MutateUpdatePhysical = &podHook{}
)

func (p *podHook) MutateCreatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return markPod(obj)
}

func (p *podHook) MutateUpdatePhysical(_ context.Context, obj client.Object) (client.Object, error) {
	return markPod(obj)
}

func markPod(obj client.Object) (client.Object, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("object %T is not a pod", obj)
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels["created-by-plugin"] = "pod-hook"
	return pod, nil
}
