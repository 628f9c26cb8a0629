package hookclient

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
)

// Side is the cluster a wrapped client talks to; it picks the hook types of its calls.
type Side string

const (
	// Physical is the host cluster: calls run CreatePhysical, UpdatePhysical, DeletePhysical
	// and GetPhysical.
	Physical Side = "Physical"
	// Virtual is the virtual (tenant) cluster: calls run CreateVirtual, UpdateVirtual,
	// DeleteVirtual and GetVirtual.
	Virtual Side = "Virtual"
)

// Wrap returns a client.Client that runs the hooks of side through hc around every call of c:
//
//   - Get runs Get{side} on the object after the read; List runs Get{side} on all items in one
//     request (see Client.MutateList). A failed read is returned as it is, without hooks.
//   - Create, Update and Delete run Create{side}, Update{side} and Delete{side} on the object
//     before the write; the write is not made when the hook call returns an error.
//   - Patch runs Update{side} on obj before the patch is computed and sent. Patches built from
//     obj (client.MergeFrom, client.StrategicMergeFrom, client.Apply) therefore carry the
//     hooks' changes, so the server ends up with what an Update would have written; a
//     client.RawPatch carries only its own bytes and the hooks' changes to obj are lost
//     (obj is overwritten by the server's answer).
//   - Status().Update and Status().Patch (and SubResource("status")) run Update{side} the same
//     way. Other subresources, Status().Create and subresource reads go straight through.
//   - Apply (server-side apply configurations) and DeleteAllOf cannot run hooks on whole
//     objects: on a kind with Create/Update (Apply) or Delete (DeleteAllOf) hooks of side they
//     return an *Error wrapping ErrUnsupported and send nothing; on other kinds they go
//     straight through.
//
// GVKs come from c's scheme (apiutil.GVKForObject). Kinds without hooks of the call's hook
// type make no request to the sidecar. Everything else (Scheme, RESTMapper, …) is c's. It is
// controller-runtime's client/interceptor around c, with one method of wrapper per
// intercepted call.
func Wrap(c client.Client, hc *Client, side Side) client.Client {
	w := &wrapper{hc: hc, scheme: c.Scheme()}
	hs := hooks.Physical // side as package hooks names it
	if side == Virtual {
		hs = hooks.Virtual
	}
	w.types.create, w.types.update = hooks.HookTypeOf(hs, hooks.OpCreate), hooks.HookTypeOf(hs, hooks.OpUpdate)
	w.types.del, w.types.get = hooks.HookTypeOf(hs, hooks.OpDelete), hooks.HookTypeOf(hs, hooks.OpGet)
	return interceptor.NewClient(withWatch(c), interceptor.Funcs{
		Get:               w.get,
		List:              w.list,
		Create:            w.create,
		Update:            w.update,
		Patch:             w.patch,
		Delete:            w.delete,
		DeleteAllOf:       w.deleteAllOf,
		Apply:             w.apply,
		SubResourceUpdate: w.subResourceUpdate,
		SubResourcePatch:  w.subResourcePatch,
		SubResourceApply:  w.subResourceApply,
	})
}

// withWatch returns c as a client.WithWatch, which controller-runtime's interceptor wraps; a
// client without Watch gets one that refuses.
func withWatch(c client.Client) client.WithWatch {
	if ww, ok := c.(client.WithWatch); ok {
		return ww
	}
	return noWatch{c}
}

// noWatch is a client.Client with a Watch that refuses.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, fmt.Errorf("hookclient: the wrapped client does not watch")
}

// wrapper holds what the interceptor functions of Wrap share; its methods named after a
// client call are those functions.
type wrapper struct {
	hc     *Client
	scheme *runtime.Scheme
	// types are the hook types of side's calls.
	types struct{ create, update, del, get hooks.HookType }
}

// get reads the object, then runs Get{side} on it.
func (w *wrapper) get(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	return w.run(ctx, w.types.get, obj)
}

// list reads the list, then runs Get{side} on all its items in one request.
func (w *wrapper) list(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.List(ctx, list, opts...); err != nil {
		return err
	}
	gvk, err := w.gvk(list)
	if err != nil {
		return err
	}
	return w.hc.mutateList(ctx, w.types.get, gvk, list)
}

// create runs Create{side} on obj, then creates it.
func (w *wrapper) create(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if err := w.run(ctx, w.types.create, obj); err != nil {
		return err
	}
	return c.Create(ctx, obj, opts...)
}

// update runs Update{side} on obj, then updates it.
func (w *wrapper) update(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
	if err := w.run(ctx, w.types.update, obj); err != nil {
		return err
	}
	return c.Update(ctx, obj, opts...)
}

// patch runs Update{side} on obj, then sends the patch (computed from obj after the hooks).
func (w *wrapper) patch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := w.run(ctx, w.types.update, obj); err != nil {
		return err
	}
	return c.Patch(ctx, obj, patch, opts...)
}

// delete runs Delete{side} on obj, then deletes it.
func (w *wrapper) delete(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	if err := w.run(ctx, w.types.del, obj); err != nil {
		return err
	}
	return c.Delete(ctx, obj, opts...)
}

// deleteAllOf refuses when obj's kind has Delete{side} hooks (they cannot run per object);
// otherwise it deletes.
func (w *wrapper) deleteAllOf(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
	gvk, err := w.gvk(obj)
	if err != nil {
		return err
	}
	if w.hc.Hooked(ctx, gvk, w.types.del) {
		return &Error{
			Type: w.types.del, GVK: gvk, Object: "DeleteAllOf in " + obj.GetNamespace(),
			Err: fmt.Errorf("%w: DeleteAllOf cannot run hooks per object; list and delete one by one", ErrUnsupported),
		}
	}
	return c.DeleteAllOf(ctx, obj, opts...)
}

// apply refuses when the kind of obj has Create{side} or Update{side} hooks (see checkApply);
// otherwise it applies.
func (w *wrapper) apply(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := w.checkApply(ctx, obj); err != nil {
		return err
	}
	return c.Apply(ctx, obj, opts...)
}

// isStatus reports whether the subresource name is status, the one whose writes run hooks.
func isStatus(name string) bool { return name == "status" }

// subResourceUpdate runs Update{side} on obj for the status subresource, then updates the
// subresource.
func (w *wrapper) subResourceUpdate(ctx context.Context, c client.Client, name string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if isStatus(name) {
		if err := w.run(ctx, w.types.update, obj); err != nil {
			return err
		}
	}
	return c.SubResource(name).Update(ctx, obj, opts...)
}

// subResourcePatch runs Update{side} on obj for the status subresource, then patches the
// subresource.
func (w *wrapper) subResourcePatch(ctx context.Context, c client.Client, name string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if isStatus(name) {
		if err := w.run(ctx, w.types.update, obj); err != nil {
			return err
		}
	}
	return c.SubResource(name).Patch(ctx, obj, patch, opts...)
}

// subResourceApply refuses, for the status subresource, what apply refuses; otherwise it
// applies to the subresource.
func (w *wrapper) subResourceApply(ctx context.Context, c client.Client, name string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if isStatus(name) {
		if err := w.checkApply(ctx, obj); err != nil {
			return err
		}
	}
	return c.SubResource(name).Apply(ctx, obj, opts...)
}

func (w *wrapper) gvk(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, w.scheme)
	if err != nil {
		return gvk, fmt.Errorf("hookclient: GVK of %T: %w", obj, err)
	}
	return gvk, nil
}

// run runs hook type t on obj (before a write, or after a read).
func (w *wrapper) run(ctx context.Context, t hooks.HookType, obj client.Object) error {
	gvk, err := w.gvk(obj)
	if err != nil {
		return err
	}
	return w.hc.mutate(ctx, t, gvk, obj)
}

// checkApply returns an ErrUnsupported error when the kind of an apply configuration has
// Create or Update hooks of the side.
func (w *wrapper) checkApply(ctx context.Context, obj runtime.ApplyConfiguration) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("hookclient: encode apply configuration: %w", err)
	}
	gvk, err := engine.ObjectGVK(raw)
	if err != nil {
		return fmt.Errorf("hookclient: apply configuration: %w", err)
	}
	for _, t := range []hooks.HookType{w.types.create, w.types.update} {
		if w.hc.Hooked(ctx, gvk, t) {
			return &Error{
				Type: t, GVK: gvk, Object: "apply configuration",
				Err: fmt.Errorf("%w: server-side apply sends a partial object that hooks cannot see whole; use Create, Update or Patch", ErrUnsupported),
			}
		}
	}
	return nil
}
