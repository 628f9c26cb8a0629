package hooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Metadata is what a MetadataFunc reads and changes: the object's namespace (read only) and its
// labels and annotations (nil when the object has none).
type Metadata struct {
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
}

// MetadataFunc changes m.Labels and m.Annotations (in place, or by setting new maps or nil) and
// nothing else. It must make exactly the change that the hook's MutateFunc makes to a typed
// object with the same namespace, labels and annotations.
type MetadataFunc func(ctx context.Context, m *Metadata) error

// MetadataHook is a FuncHook whose every change is to labels and annotations, with a
// MetadataFunc that makes it from those alone. A chain made only of such hooks runs on the
// request's JSON without decoding the typed object (the label/annotation fast path); a chain
// that mixes them with other hooks runs their MutateFuncs as usual.
type MetadataHook interface {
	FuncHook
	MetadataFunc() MetadataFunc
}

// NewMetadataFunc returns a MetadataHook named name for the kind of resource and the hook types
// in types: mutate is its typed form, meta the same change on Metadata (builtin's labels hook,
// and its strip hook when every path is a label or annotation key).
func NewMetadataFunc(name string, resource client.Object, types []HookType, mutate MutateFunc, meta MetadataFunc) MetadataHook {
	return &metadataHook{funcHook: NewFunc(name, resource, types, mutate).(*funcHook), meta: meta}
}

type metadataHook struct {
	*funcHook
	meta MetadataFunc
}

func (h *metadataHook) MetadataFunc() MetadataFunc { return h.meta }
