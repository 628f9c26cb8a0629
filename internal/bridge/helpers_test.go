package bridge_test

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// examplePod returns a small Pod with labels, annotations and a spec.
func examplePod() *corev1.Pod {
	start := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "tenant", UID: "0b6d1b8e-3c1e-4f7e-9c39-8f2b1f6f7a10", CreationTimestamp: start,
			Labels:      map[string]string{"app": "web", "host.example.com/pool": "blue"},
			Annotations: map[string]string{"owner": "team-a", "host.example.com/internal": "x"},
		},
		Spec:   corev1.PodSpec{NodeName: "node-7", Containers: []corev1.Container{{Name: "app", Image: "nginx"}, {Name: "sidecar", Image: "busybox"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.7", StartTime: &start},
	}
}
