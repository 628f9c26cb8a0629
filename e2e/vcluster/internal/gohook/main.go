// Command gohook is synchook with one Go hook, for e2e/vcluster's TestDay2GoHookUpgraded: it
// sets the label team on Pods on their way to the host (CreatePhysical, UpdatePhysical) to
// value, which is set at link time, as is synchook's version (the revision of a Go hook, part
// of its sealed undo's writer fingerprint):
//
//	go build -ldflags "-X main.value=a -X github.com/synchook/synchook/plugin.version=e2e-a" -o gohook-a .
//
// It is a module of its own (like examples/pod-hook): e2e/vcluster never imports synchook
// (vcluster's dependency graph clashes with synchook's), and the test builds this directory
// against the synchook repository it tests (go mod edit -replace).
package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/plugin"
)

// value is the team label's value, set with -ldflags "-X main.value=...".
var value = "unset"

// field is what the hook sets: "label" (the team label) or "nodeSelector" (spec.nodeSelector's
// pool, a typed spec change: TestV2Throughput's synchook-typed), set with -X main.field=....
// "bound" and "bound-encode" serve bound.go's boundServer instead (TestV2Throughput's bounds).
var field = "label"

func main() {
	plugin.MustInit()
	plugin.MustRegister(hooks.Typed("go-team-label", []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical},
		func(_ context.Context, pod *corev1.Pod) error {
			if field == "nodeSelector" {
				if pod.Spec.NodeSelector == nil {
					pod.Spec.NodeSelector = map[string]string{}
				}
				pod.Spec.NodeSelector["pool"] = value
				return nil
			}
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels["team"] = value
			return nil
		}))
	plugin.MustStart()
}
