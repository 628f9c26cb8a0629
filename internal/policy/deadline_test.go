package policy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policy"
)

// TestTheDeadlineStopsACELEvaluation: a policy evaluation on a big object returns soon after
// its context ends, not when the cost budget runs out (which is seconds of CPU later): the
// hook's goroutine frees its concurrency slot instead of running on, abandoned.
func TestTheDeadlineStopsACELEvaluation(t *testing.T) {
	m, err := policy.ParseFile(filepath.Join("..", "..", "examples", "policies", "toleration-remove.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := p.MutateFunc(hooks.UpdatePhysical)
	if err != nil {
		t.Fatal(err)
	}
	pod := samplePod()
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
	for i := range 30000 {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: corev1.TolerationOpExists})
	}
	full := time.Now()
	if _, err := fn(t.Context(), pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	whole := time.Since(full)
	ctx, cancel := context.WithTimeout(t.Context(), whole/10)
	defer cancel()
	start := time.Now()
	_, err = fn(ctx, pod.DeepCopy())
	took := time.Since(start)
	t.Logf("whole evaluation %s; with a deadline of %s it returned after %s (%v)", whole, whole/10, took, err)
	if err == nil || took > whole/2 {
		t.Errorf("the evaluation ran on past its deadline: %s of %s, error %v", took, whole, err)
	}
}
