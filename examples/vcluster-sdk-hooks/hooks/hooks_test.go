package hooks_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/examples/vcluster-sdk-hooks/hooks"
	sdk "github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/hooks/hookstest"
)

// The vcluster-sdk hooks, unchanged, through synchook's engine: what they write, and the read
// of it gives the syncer back what it sent (automatic undo).
func TestHooksWriteAndTheReadGivesTheObjectBack(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "web", Namespace: "default"}
	pod := hookstest.RoundTrip(t, hooks.NewPodHook(), sdk.CreatePhysical, &corev1.Pod{ObjectMeta: meta})
	if got := pod.Labels["created-by-plugin"]; got != "pod-hook" {
		t.Errorf("pod label created-by-plugin = %q, want pod-hook", got)
	}
	svc := hookstest.RoundTrip(t, hooks.NewServiceHook(), sdk.UpdatePhysical,
		&corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
	if got := svc.Spec.Ports[0].Port; got != 8080 {
		t.Errorf("host service port %d, want 8080", got)
	}
	secret := hookstest.RoundTrip(t, hooks.NewSecretHook(), sdk.CreateVirtual, &corev1.Secret{ObjectMeta: meta})
	if got := string(secret.Data["created-by-plugin"]); got != "secret-hook" {
		t.Errorf("secret key created-by-plugin = %q, want secret-hook", got)
	}
}
