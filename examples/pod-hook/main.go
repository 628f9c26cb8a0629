// Command pod-hook is synchook with one Go hook: it labels every pod vcluster creates in the
// host cluster with the tenant of its settings. It needs no GetPhysical hook to take the label
// off again: synchook's automatic undo records the change in the synchook.io/undo annotation
// and gives the syncer back the pod it sent when it reads the host pod, so the syncer never
// sees a difference. Build and try it:
//
//	go build -o pod-hook . && ./pod-hook mutate --type CreatePhysical -f ../pod.yaml -o yaml > /tmp/hooked.yaml
//	./pod-hook mutate --type GetPhysical -f /tmp/hooked.yaml -o yaml   # ../pod.yaml again
//
// The tenant comes from the config's settings key (default team-a), e.g.
// SYNCHOOK_CONFIG='settings: {tenant: team-b}' or, under vcluster, the plugin's config.
package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/plugin"
)

// TenantLabel is the label the hook puts on host pods.
const TenantLabel = "example.com/tenant"

// Settings are the hook's settings, under the config's settings key.
type Settings struct {
	// Tenant is the value of TenantLabel. Default "team-a".
	Tenant string `json:"tenant"`
}

// NewPodHook returns the hook that labels pods with s.Tenant on their way to the host. It runs
// on CreatePhysical and UpdatePhysical: vcluster writes a host pod again by Update (the pod it
// read plus the tenant's change), so a Create-only label would be lost at the first update.
func NewPodHook(s Settings) hooks.FuncHook {
	return hooks.Typed("pod-tenant-label", []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, func(_ context.Context, pod *corev1.Pod) error {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[TenantLabel] = s.Tenant
		return nil
	})
}

func main() {
	plugin.MustInit()
	settings := Settings{Tenant: "team-a"}
	plugin.MustUnmarshalConfig(&settings)
	plugin.MustRegister(NewPodHook(settings))
	plugin.MustStart()
}
