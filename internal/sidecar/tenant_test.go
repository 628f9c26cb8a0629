package sidecar_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/tenanttest"
)

// TestTenantAttacksOffline runs the tenant attack suite through sidecar.Mutate, what
// `synchook mutate` runs (with --undo-key-file: tenanttest's registry holds a key).
func TestTenantAttacksOffline(t *testing.T) {
	reg := tenanttest.Registry(t)
	m := func(t *testing.T, typ hooks.HookType, gvk schema.GroupVersionKind, obj []byte) ([]byte, error) {
		res, err := sidecar.Mutate(t.Context(), reg, typ, obj, tenanttest.RequestTimeout)
		if err != nil {
			return nil, err
		}
		if res.Patch == nil {
			return obj, nil
		}
		return res.Object, nil
	}
	tenanttest.Run(t, tenanttest.Transport{Mutate: m, Lists: true})
}
