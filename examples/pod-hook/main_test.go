package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/hooks/hookstest"
)

func TestPodHookLabelsTheHostPodAndTheReadGivesThePodBack(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}}}
	written := hookstest.RoundTrip(t, NewPodHook(Settings{Tenant: "team-b"}), hooks.CreatePhysical, pod)
	if got := written.Labels[TenantLabel]; got != "team-b" {
		t.Errorf("label %s = %q, want team-b", TenantLabel, got)
	}
}
