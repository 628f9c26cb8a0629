package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/tenanttest"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// undoCounter is an Observer that counts dropped undos by reason and loops.
type undoCounter struct {
	mu       sync.Mutex
	rejected map[string]int
	loops    int
}

func (*undoCounter) ObserveHook(string, hooks.HookType, schema.GroupVersionKind, time.Duration, error) {
}

func (u *undoCounter) ObserveUndoRejected(_ hooks.HookType, _ schema.GroupVersionKind, reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rejected[reason]++
}

func (u *undoCounter) ObserveLoop(string, hooks.HookType, schema.GroupVersionKind, string, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.loops++
}

// runnerMutator is the in-process transport: Runner.Mutate with the patch applied.
func runnerMutator(r *engine.Runner) tenanttest.Mutator {
	return func(t *testing.T, typ hooks.HookType, gvk schema.GroupVersionKind, obj []byte) ([]byte, error) {
		ctx, cancel := context.WithTimeout(t.Context(), tenanttest.RequestTimeout)
		defer cancel()
		res, err := r.Mutate(ctx, gvk, typ, obj)
		if err != nil || res.Patch == nil {
			return obj, err
		}
		return patch.Apply(obj, res.Patch)
	}
}

func TestTenantAttacksInProcess(t *testing.T) {
	obs := &undoCounter{rejected: map[string]int{}}
	r := engine.NewRunner(tenanttest.Registry(t), engine.RunnerOptions{MaxConcurrent: 1, Observer: obs})
	tenanttest.Run(t, tenanttest.Transport{Mutate: runnerMutator(r), Lists: true})

	t.Run("every dropped undo is counted by its reason", func(t *testing.T) {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		for _, reason := range []string{undo.ReasonClearText, undo.ReasonTooLarge, undo.ReasonMalformed, undo.ReasonUnauthentic} {
			if obs.rejected[reason] == 0 {
				t.Errorf("no undo counted as %q: %v", reason, obs.rejected)
			}
		}
	})
	t.Run("the loop detector does not blame the hooks for a tenant's annotation the chain keeps removing", func(t *testing.T) {
		sent := tenanttest.Pod("web", map[string]string{undo.Annotation: "[]", undo.ProvenanceAnnotation: "x@y#z"})
		for range 2 * engine.DefaultLoopThreshold {
			if _, err := r.Mutate(t.Context(), tenanttest.PodGVK, hooks.UpdatePhysical, sent); err != nil {
				t.Fatal(err)
			}
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if obs.loops != 0 {
			t.Errorf("%d loops reported for a patch that only handles the reserved annotations", obs.loops)
		}
	})
}

func TestWithoutAKeyAHookedWriteIsRefusedAndAReadAppliesNothing(t *testing.T) {
	obs := &undoCounter{rejected: map[string]int{}}
	r := engine.NewRunner(tenanttest.RegistryWithoutKey(t), engine.RunnerOptions{MaxConcurrent: 1, Observer: obs})
	sent := []byte(strings.Replace(string(tenanttest.Pod("web", nil)), `"platform.example.com/team":"a"`, `"platform.example.com/team":"tenant"`, 1))
	for _, typ := range []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical, hooks.CreateVirtual, hooks.UpdateVirtual} {
		res, err := r.Mutate(t.Context(), tenanttest.PodGVK, typ, sent)
		if !errors.Is(err, undo.ErrNeedsKey) || res.Patch != nil {
			t.Errorf("%s without a key: %v, patch %s; want undo.ErrNeedsKey and nothing written", typ, err, res.Patch)
		}
		if f, _ := failure.Classify(err); f != failure.Protected {
			t.Errorf("%s: failure %v, want Protected (a failed precondition: the caller retries)", typ, f)
		}
	}
	// A clear-text undo a tenant wrote, which fits the object: never applied.
	stored := tenanttest.Pod("web", map[string]string{undo.Annotation: `[{"path":"/spec/serviceAccountName","hooked":"default","original":"platform-admin"}]`})
	res, err := r.Mutate(t.Context(), tenanttest.PodGVK, hooks.GetPhysical, stored)
	if err != nil || res.Patch != nil {
		t.Errorf("a read without a key: %v, patch %s; want the object as stored", err, res.Patch)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.rejected[undo.ReasonClearText] == 0 {
		t.Errorf("no undo counted as %q: %v", undo.ReasonClearText, obs.rejected)
	}
}
