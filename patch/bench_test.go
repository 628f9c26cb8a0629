package patch_test

import (
	"testing"

	"gomodules.xyz/jsonpatch/v2"

	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/patch"
)

// onePodLabelPair returns the ~5 KiB benchmark Pod before and after a one-label change.
func onePodLabelPair() (before, after []byte) {
	pod := fixtures.Pod("ns", "web")
	before = fixtures.JSON(pod)
	pod.Labels["synchook.io/hooked"] = "true"
	return before, fixtures.JSON(pod)
}

// BenchmarkPatchCreate compares patch creation for a one-label change on the 5 KiB Pod:
// gomodules.xyz/jsonpatch CreatePatch (the baseline) against our Diff.
func BenchmarkPatchCreate(b *testing.B) {
	before, after := onePodLabelPair()
	b.Run("gomodules", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ops, err := jsonpatch.CreatePatch(before, after); err != nil || len(ops) != 1 {
				b.Fatal(ops, err)
			}
		}
	})
	b.Run("diff", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ops, err := patch.Diff(before, after); err != nil || len(ops) != 1 {
				b.Fatal(ops, err)
			}
		}
	})
	b.Run("diff-marshaled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ops := patch.DiffMarshaled(before, after); len(ops) != 1 {
				b.Fatal(ops)
			}
		}
	})
}

// BenchmarkPatchApply applies the one-label patch to the 5 KiB Pod with evanphx/json-patch.
func BenchmarkPatchApply(b *testing.B) {
	before, after := onePodLabelPair()
	pj, _ := patch.Marshal(patch.DiffMarshaled(before, after))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := patch.Apply(before, pj); err != nil {
			b.Fatal(err)
		}
	}
}
