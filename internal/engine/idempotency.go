package engine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// NotIdempotentError is returned by CheckIdempotent for a chain that changes an object again
// when it runs on its own result: f(f(x)) != f(x). Such a chain fights the syncer: every pass
// writes a new change (e.g. a hook that appends a toleration each time).
type NotIdempotentError struct {
	// Hooks names the chain's hooks, Type its hook type and GVK the kind.
	Hooks string
	Type  hooks.HookType
	GVK   schema.GroupVersionKind
	// Path is the first JSON Pointer that kept changing.
	Path string
}

func (e *NotIdempotentError) Error() string {
	return fmt.Sprintf("hook %q %s %s is not idempotent: running it on its own result changes %s again (the syncer would write on every pass; fix the hook, or start with --skip-idempotency-check)",
		e.Hooks, e.Type, e.GVK.Kind, e.Path)
}

// CheckIdempotent runs every chain twice on each sample object of its kind — once on the
// sample, once on that result — and returns a *NotIdempotentError for the first chain whose
// second run changes anything but the undo annotation. samples returns the JSON objects to try
// for a GVK (none: the chain is not checked). A chain that fails on a sample (it refuses it,
// say) is not judged on that sample.
//
// The runs seal with a throwaway key, never the Registry's: the samples are not objects of the
// cluster (nothing may note their kinds as sealed, undo.Keeper.NoteSealed), and a vcluster
// plugin v2 reads its key at Initialize, after this check.
func (r *Registry) CheckIdempotent(ctx context.Context, samples func(schema.GroupVersionKind) [][]byte) error {
	r, err := r.withSealingKey()
	if err != nil {
		return err
	}
	plain := NewRunner(r, RunnerOptions{}).newCall(false)
	plain.keepOwnUndo = true // the second run must see the first run's result, not undo it
	for _, key := range r.Keys() {
		c := r.chains[key]
		if len(c.hooks) == 0 {
			continue
		}
		for _, x := range samples(key.GVK) {
			if path := plain.changesAgain(ctx, c, x); path != "" {
				return &NotIdempotentError{Hooks: plain.culprit(ctx, c, x), Type: key.Type, GVK: key.GVK, Path: path}
			}
		}
	}
	return nil
}

// withSealingKey returns r without undo, else a copy of r (same chains) that seals with a
// throwaway key of its own.
func (r *Registry) withSealingKey() (*Registry, error) {
	if !r.opts.Undo {
		return r, nil
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		return nil, err
	}
	cp := *r
	cp.opts.Keys = undo.NewKeeper(ring)
	return &cp, nil
}

// changedPath returns the first path of ops other than the reserved annotations' (a second run
// replaces the undo and drops a provenance mark when its hooks change nothing more), or "".
func changedPath(ops []patch.Operation) string {
	for _, op := range ops {
		if !undo.IsReservedPath(op.Path) && op.Path != "/metadata/annotations" {
			return op.Path
		}
	}
	return ""
}

// culprit names the hook of c that is not idempotent on its own on x, or c's hook names when
// none is alone.
func (rn *call) culprit(ctx context.Context, c *chain, x []byte) string {
	if len(c.hooks) == 1 {
		return c.names()
	}
	for _, h := range c.hooks {
		if rn.changesAgain(ctx, c.of(c.key, []namedFunc{h}), x) != "" {
			return h.name
		}
	}
	return c.names()
}

// changesAgain returns the first path that c, run on its own result on x, changes again ("":
// none, or a run failed: c is not judged on x).
func (rn *call) changesAgain(ctx context.Context, c *chain, x []byte) string {
	once, _, err := rn.applyChain(ctx, c, x)
	if err != nil {
		return ""
	}
	twice, _, err := rn.applyChain(ctx, c, once)
	if err != nil {
		return ""
	}
	ops, err := patch.Diff(once, twice)
	if err != nil {
		return ""
	}
	return changedPath(ops)
}
