package hookclient

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/synchook/synchook/hooks"
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

// hookTypes returns the Create, Update, Delete and Get hook types of s.
func (s Side) hookTypes() (create, update, del, get hooks.HookType) {
	if s == Virtual {
		return hooks.CreateVirtual, hooks.UpdateVirtual, hooks.DeleteVirtual, hooks.GetVirtual
	}
	return hooks.CreatePhysical, hooks.UpdatePhysical, hooks.DeletePhysical, hooks.GetPhysical
}

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
// type make no request to the sidecar. Everything else (Scheme, RESTMapper, …) is c's.
func Wrap(c client.Client, hc *Client, side Side) client.Client {
	return &hookedClient{Client: c, hc: hc, side: side}
}

// hookedClient is the client.Client returned by Wrap.
type hookedClient struct {
	client.Client
	hc   *Client
	side Side
}

func (w *hookedClient) gvk(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, w.Scheme())
	if err != nil {
		return gvk, fmt.Errorf("hookclient: GVK of %T: %w", obj, err)
	}
	return gvk, nil
}

// before runs hook type t on obj, for a write that follows.
func (w *hookedClient) before(ctx context.Context, t hooks.HookType, obj client.Object) error {
	gvk, err := w.gvk(obj)
	if err != nil {
		return err
	}
	return w.hc.mutate(ctx, t, gvk, obj)
}

// Get implements client.Reader: Get{side} after the read.
func (w *hookedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := w.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	_, _, _, get := w.side.hookTypes()
	return w.before(ctx, get, obj)
}

// List implements client.Reader: Get{side} on every item, in one request.
func (w *hookedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := w.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	gvk, err := w.gvk(list)
	if err != nil {
		return err
	}
	_, _, _, get := w.side.hookTypes()
	return w.hc.mutateList(ctx, get, gvk, list)
}

// Create implements client.Writer: Create{side} before the write.
func (w *hookedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	create, _, _, _ := w.side.hookTypes()
	if err := w.before(ctx, create, obj); err != nil {
		return err
	}
	return w.Client.Create(ctx, obj, opts...)
}

// Update implements client.Writer: Update{side} before the write.
func (w *hookedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	_, update, _, _ := w.side.hookTypes()
	if err := w.before(ctx, update, obj); err != nil {
		return err
	}
	return w.Client.Update(ctx, obj, opts...)
}

// Patch implements client.Writer: Update{side} on obj before the patch is computed.
func (w *hookedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	_, update, _, _ := w.side.hookTypes()
	if err := w.before(ctx, update, obj); err != nil {
		return err
	}
	return w.Client.Patch(ctx, obj, patch, opts...)
}

// Delete implements client.Writer: Delete{side} before the delete.
func (w *hookedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	_, _, del, _ := w.side.hookTypes()
	if err := w.before(ctx, del, obj); err != nil {
		return err
	}
	return w.Client.Delete(ctx, obj, opts...)
}

// DeleteAllOf implements client.Writer: refused on kinds with Delete{side} hooks.
func (w *hookedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	gvk, err := w.gvk(obj)
	if err != nil {
		return err
	}
	_, _, del, _ := w.side.hookTypes()
	if w.hc.Hooked(ctx, gvk, del) {
		return &Error{
			Type: del, GVK: gvk, Object: "DeleteAllOf in " + obj.GetNamespace(),
			Err: fmt.Errorf("%w: DeleteAllOf cannot run hooks per object; list and delete one by one", ErrUnsupported),
		}
	}
	return w.Client.DeleteAllOf(ctx, obj, opts...)
}

// Apply implements client.Writer: refused on kinds with Create{side} or Update{side} hooks.
func (w *hookedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := w.checkApply(ctx, obj); err != nil {
		return err
	}
	return w.Client.Apply(ctx, obj, opts...)
}

// checkApply returns an ErrUnsupported error when the kind of an apply configuration has
// Create or Update hooks of the side.
func (w *hookedClient) checkApply(ctx context.Context, obj runtime.ApplyConfiguration) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("hookclient: encode apply configuration: %w", err)
	}
	gvk, err := hooks.ObjectGVK(raw)
	if err != nil {
		return fmt.Errorf("hookclient: apply configuration: %w", err)
	}
	create, update, _, _ := w.side.hookTypes()
	for _, t := range []hooks.HookType{create, update} {
		if w.hc.Hooked(ctx, gvk, t) {
			return &Error{
				Type: t, GVK: gvk, Object: "apply configuration",
				Err: fmt.Errorf("%w: server-side apply sends a partial object that hooks cannot see whole; use Create, Update or Patch", ErrUnsupported),
			}
		}
	}
	return nil
}

// Status implements client.StatusClient: Update{side} before status writes.
func (w *hookedClient) Status() client.SubResourceWriter {
	return &hookedStatusWriter{SubResourceWriter: w.Client.Status(), w: w}
}

// SubResource implements client.SubResourceClientConstructor: "status" writes run
// Update{side}; other subresources go straight through.
func (w *hookedClient) SubResource(subResource string) client.SubResourceClient {
	inner := w.Client.SubResource(subResource)
	if subResource != "status" {
		return inner
	}
	return &hookedStatusClient{
		SubResourceReader:  inner,
		hookedStatusWriter: hookedStatusWriter{SubResourceWriter: inner, w: w},
	}
}

// hookedStatusWriter runs Update{side} before Update and Patch of the status subresource.
type hookedStatusWriter struct {
	client.SubResourceWriter
	w *hookedClient
}

// Update runs Update{side} on obj, then writes its status.
func (s *hookedStatusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	_, update, _, _ := s.w.side.hookTypes()
	if err := s.w.before(ctx, update, obj); err != nil {
		return err
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

// Patch runs Update{side} on obj, then sends the status patch.
func (s *hookedStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	_, update, _, _ := s.w.side.hookTypes()
	if err := s.w.before(ctx, update, obj); err != nil {
		return err
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// Apply refuses apply configurations of kinds with Create{side} or Update{side} hooks.
func (s *hookedStatusWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.w.checkApply(ctx, obj); err != nil {
		return err
	}
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

// hookedStatusClient is SubResource("status"): reads go straight through, writes are hooked.
type hookedStatusClient struct {
	client.SubResourceReader
	hookedStatusWriter
}

var (
	_ client.Client            = (*hookedClient)(nil)
	_ client.SubResourceWriter = (*hookedStatusWriter)(nil)
	_ client.SubResourceClient = (*hookedStatusClient)(nil)
)
