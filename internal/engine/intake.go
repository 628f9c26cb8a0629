package engine

// The engine's side of the intake (package intake, the one reader of a request's bytes): the
// request's own record, checked once, and the checks of its old object and a List's items.

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
)

// recordOf returns the intake record of raw: the call's own when raw is its object, else a derived one.
func (r *call) recordOf(raw []byte) *intake.Record {
	if own := r.rec; own != nil && len(raw) > 0 && len(own.Raw) == len(raw) && &own.Raw[0] == &raw[0] {
		return own
	}
	return &intake.Record{Raw: raw}
}

// checkInput checks raw, the object of a request for (gvk, t), before any chain reads it and
// returns its own record, made in into (intake.Shape.Check): a *failure.DecodeError with an
// *intake.InputError for an object InputError describes. Nil record: a (gvk, t) without a chain (not checked), or invalid JSON
// (left to the chain's decode, which names the syntax error). A list of a hooked kind is checked
// as a list here and each item in runList (checkItem).
func (r *Registry) checkInput(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte, valid bool, into *intake.Record) (*intake.Record, error) {
	list := false
	if r.chains[Key{GVK: gvk, Type: t}] == nil {
		if r.listChain(gvk, t) == nil {
			return nil, nil
		}
		list = true
	}
	err := intake.ShapeOf(r.scheme, gvk, list).Check(raw, gvk, "object", "the request is for", into)
	if err != nil && (&intake.Record{Raw: raw}).CheckJSON(gvk, valid) != nil {
		return nil, nil // the scan's answer on invalid JSON means nothing
	}
	if err != nil {
		return nil, &failure.DecodeError{GVK: gvk, Err: err}
	}
	if into.Raw == nil {
		return nil, nil
	}
	return into, nil
}

// withOldObject checks old (MutateOptions.OldObject) as checkInput checks the object and
// returns ctx carrying it for the hooks (hooks.WithOldObject); nothing for a (gvk, t) without a
// chain, an error for a list. Errors are *DecodeErrors with Old set.
func (r *Registry) withOldObject(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, old []byte, valid bool) (context.Context, error) {
	if r.chains[Key{GVK: gvk, Type: t}] == nil {
		if r.listChain(gvk, t) != nil {
			return nil, &failure.DecodeError{GVK: gvk, Old: true, Err: &intake.InputError{Reason: "an old object is for one object, not a list"}}
		}
		return ctx, nil
	}
	if err := (&intake.Record{Raw: old}).CheckJSON(gvk, valid); err != nil {
		err.(*failure.DecodeError).Old = true //nolint:errorlint // CheckJSON's own
		return nil, err
	}
	var rec intake.Record
	err := intake.ShapeOf(r.scheme, gvk, false).Check(old, gvk, "old object", "the request is for", &rec)
	if err == nil && rec.Raw == nil {
		err = errors.New("not a JSON object")
	}
	if err != nil {
		return nil, &failure.DecodeError{GVK: gvk, Old: true, Err: err}
	}
	return hooks.WithOldObject(ctx, old), nil
}

// checkItem is checkInput for item, an item (valid JSON) of a list whose items are of kind gvk.
func (r *Registry) checkItem(gvk schema.GroupVersionKind, item []byte) error {
	var rec intake.Record
	if err := intake.ShapeOf(r.scheme, gvk, false).Check(item, gvk, "item", "the list is of", &rec); err != nil {
		return &failure.DecodeError{GVK: gvk, Err: err}
	}
	return nil
}
