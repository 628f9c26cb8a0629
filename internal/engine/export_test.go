package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
)

// TakesAsOwnUndo reports whether the write chain (gvk, t) of reg takes the undo annotation on
// raw as one synchook wrote itself (applied, not recorded as the tenant's value): the write
// plan runRestored asks for.
func TakesAsOwnUndo(reg *Registry, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) bool {
	read, write := t.ReadOf()
	meta, _, ok := jsonscan.Find(raw, "metadata")
	if reg.chains[Key{GVK: gvk, Type: t}] == nil || !write || !ok {
		return false
	}
	value, had := undo.AnnotationIn(meta.Value)
	if !had {
		return false
	}
	_, own := reg.rule(Key{GVK: gvk, Type: read}).PlanWrite(t.Op() == hooks.OpUpdate, undo.SubjectOf(gvk, read.Side(), raw, jsondoc.New(raw)), value)
	return own
}

// MutateValidJSON is Mutate for a raw known to be valid JSON (MutateOptions.ValidJSON, as a
// List's items are run): the label/annotation fast path and the List split do not check it
// again.
func (r *Runner) MutateValidJSON(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (Result, error) {
	return r.MutateWithOptions(ctx, gvk, t, raw, MutateOptions{ValidJSON: true})
}
