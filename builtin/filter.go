package builtin

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
)

// Filter limits a hook to some objects, the way a webhook's namespaceSelector and
// objectSelector do. Objects that do not match pass through unchanged. The zero Filter matches
// every object.
type Filter struct {
	// Namespaces, when not empty, lists the namespaces whose objects the hook changes. It is
	// compared with the namespace of the object the hook receives: for the *Physical hook types
	// that is the host namespace the syncer writes to. Cluster-scoped objects (no namespace)
	// never match a non-empty list.
	Namespaces []string
	// ObjectSelector, when not nil, must match the object's labels (as they are when the hook
	// runs, so after earlier hooks in the chain). An empty selector matches every object.
	ObjectSelector *metav1.LabelSelector
}

// Filtered returns a mutate function that calls fn for the objects f matches and returns the
// others unchanged. It fails when the selector is invalid (metav1.LabelSelectorAsSelector). An
// empty Filter returns fn itself.
func Filtered(f Filter, fn hooks.MutateFunc) (hooks.MutateFunc, error) {
	matches, err := f.matcher()
	if err != nil || matches == nil {
		return fn, err
	}
	return func(ctx context.Context, obj client.Object) (client.Object, error) {
		if !matches(obj.GetNamespace(), obj.GetLabels()) {
			return obj, nil
		}
		return fn(ctx, obj)
	}, nil
}

// matcher returns whether an object with a namespace and labels matches f, or nil for the
// zero Filter (every object). It fails when the selector is invalid.
func (f Filter) matcher() (func(namespace string, objectLabels map[string]string) bool, error) {
	if len(f.Namespaces) == 0 && f.ObjectSelector == nil {
		return nil, nil
	}
	var selector labels.Selector
	if f.ObjectSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(f.ObjectSelector)
		if err != nil {
			return nil, fmt.Errorf("objectSelector: %w", err)
		}
		selector = s
	}
	namespaces := slices.Clone(f.Namespaces)
	return func(namespace string, objectLabels map[string]string) bool {
		if len(namespaces) > 0 && !slices.Contains(namespaces, namespace) {
			return false
		}
		return selector == nil || selector.Matches(labels.Set(objectLabels))
	}, nil
}
