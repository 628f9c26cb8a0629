package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/parallel"
	"github.com/synchook/synchook/patch"
)

// listSuffix ends the Kind of every list kind: PodList holds Pods.
const listSuffix = "List"

// ListItemGVK returns the GVK of the items of the list kind list: the same group and version,
// and Kind without its "List" suffix (v1 PodList → v1 Pod). It returns false when list.Kind
// does not end in "List" or is "List" alone (the generic v1 List has no single item kind).
func ListItemGVK(list schema.GroupVersionKind) (schema.GroupVersionKind, bool) {
	item, ok := strings.CutSuffix(list.Kind, listSuffix)
	if !ok || item == "" {
		return schema.GroupVersionKind{}, false
	}
	return list.GroupVersion().WithKind(item), true
}

// listChain returns the item chain when Mutate must treat (gvk, t) as a batch, else nil. It is
// the dispatch at the top of Mutate, so for kinds that do not end in "List" it costs one suffix
// check.
func (r *Registry) listChain(gvk schema.GroupVersionKind, t hooks.HookType) *chain {
	if !strings.HasSuffix(gvk.Kind, listSuffix) || r.chains[Key{GVK: gvk, Type: t}] != nil {
		return nil
	}
	item, ok := ListItemGVK(gvk)
	if !ok {
		return nil
	}
	return r.chains[Key{GVK: item, Type: t}]
}

// ItemError is returned by Mutate for a list when one item fails: it names the item and wraps
// the item's *HookError or *DecodeError, so errors.As and StatusCode see the cause.
type ItemError struct {
	// List is the list kind (v1 PodList).
	List schema.GroupVersionKind
	// Index is the position of the item in "items", from 0.
	Index int
	// Namespace and Name identify the item; either may be empty when the item lacks them.
	Namespace, Name string
	// Err is the item's error.
	Err error
}

// Error returns "<list kind> items[<index>] (<namespace>/<name>): <cause>".
func (e *ItemError) Error() string {
	id := e.Name
	if e.Namespace != "" {
		id = e.Namespace + "/" + e.Name
	}
	return fmt.Sprintf("%s items[%d] (%s): %v", e.List.Kind, e.Index, id, e.Err)
}

// Unwrap returns the item's error, for errors.Is, errors.As and StatusCode.
func (e *ItemError) Unwrap() error { return e.Err }

// runList is Mutate for a list kind: it runs the item chain on every item of raw's "items" as
// Mutate on a single object would (checkItem first) and returns one patch whose paths start
// with /items/N. Items without apiVersion and kind (the API server leaves them out) are given
// the item kind first. Items run on up to GOMAXPROCS goroutines under the one ctx and one slot;
// the failed item with the lowest index fails the batch with an *ItemError and no patch.
// Result.Hooks counts hook calls (chain length × items).
func (rn *call) runList(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (Result, error) {
	itemGVK, _ := ListItemGVK(gvk)
	items, err := intake.ListItems(raw, rn.validJSON)
	if err != nil {
		return Result{}, &failure.DecodeError{GVK: gvk, Err: err}
	}
	type itemResult struct {
		ops   []patch.Operation
		hooks int
	}
	itemCall, done, ok := rn.hold()
	if !ok {
		return Result{}, fmt.Errorf("%s: %w", gvk.Kind, failure.ErrOverloaded)
	}
	defer done()
	if !itemCall.validJSON {
		valid := *itemCall
		valid.validJSON = true // the list was checked whole
		itemCall = &valid
	}
	results := make([]itemResult, len(items))
	err = parallel.For(len(items), func(i int) error {
		item := items[i]
		id, err := intake.ItemIdentity(item, itemGVK) // item is valid JSON: raw was validated
		// The input check (checkItem) before intake.ItemIdentity's own kind check; id names the item.
		switch inputErr := rn.reg.checkItem(itemGVK, item); {
		case inputErr != nil:
			err = inputErr
		case err != nil:
			err = &failure.DecodeError{GVK: itemGVK, Err: err}
		case ctx.Err() != nil: // the deadline passed while the item waited for a worker: fail it without decoding
			err = fmt.Errorf("not started before the request ended: %w", ctx.Err())
		default:
			item = id.WithTypeMeta(item, itemGVK)
			one := *itemCall
			one.rec = &intake.Record{Raw: item} // the item's one record (derived: read on demand)
			var o outcome
			if o, err = one.runOps(ctx, itemGVK, t, item); err == nil {
				results[i] = itemResult{ops: o.ops, hooks: o.hooks}
				return nil
			}
		}
		return &ItemError{List: gvk, Index: i, Namespace: id.Namespace, Name: id.Name, Err: err}
	})
	if err != nil {
		return Result{}, err
	}
	res := Result{raw: raw}
	var ops []patch.Operation
	for i, item := range results {
		res.Hooks += item.hooks
		prefix := "/items/" + strconv.Itoa(i)
		for _, op := range item.ops {
			op.Path = prefix + op.Path
			ops = append(ops, op)
		}
	}
	if res.Patch, err = patch.Marshal(ops); err != nil {
		return Result{}, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	res.Operations, res.ops = len(ops), ops
	return res, nil
}
