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
	// whole is how long the evaluation runs without a deadline, or a lower bound of it: it is
	// measured up to wholeAtMost, which a build without the race detector does not reach (3–6 s
	// on 2 cores) and which spares a run under the detector the rest of an evaluation of one to
	// two minutes on a loaded 2-core machine (the package's tests must end within go test's
	// 10 min). The comparison below holds for whole or any lower bound of it.
	const wholeAtMost = 20 * time.Second
	full := time.Now()
	capped, stopCapped := context.WithTimeout(t.Context(), wholeAtMost)
	_, err = fn(capped, pod.DeepCopy())
	whole := time.Since(full)
	stopCapped()
	switch {
	case err != nil && whole < wholeAtMost:
		t.Fatal(err)
	case err != nil:
		t.Logf("the whole evaluation runs longer than %s: compared with that", wholeAtMost)
		whole = wholeAtMost
	}
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
