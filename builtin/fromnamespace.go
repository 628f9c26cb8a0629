package builtin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/namespaces"
)

// FromNamespace are the labels of the labels hook that come from the Namespace the object came
// from (under vcluster, the tenant's namespace in the virtual cluster: namespaces.Source.Name).
type FromNamespace struct {
	// Keys are namespace label keys to copy.
	Keys []string `json:"keys,omitempty"`
	// Prefixes copy every namespace label whose key starts with one of them
	// ("billing.example.com/").
	Prefixes []string `json:"prefixes,omitempty"`
	// Rename gives the object's key for a namespace label key (of Keys, or matched by
	// Prefixes); a key without an entry keeps its name.
	Rename map[string]string `json:"rename,omitempty"`
}

// reservedPrefixes are the label key prefixes fromNamespace never writes: vcluster's own labels
// and synchook's.
var reservedPrefixes = []string{"vcluster.loft.sh/", "synchook.io/"}

// ErrFromNamespace is wrapped by every error about a fromNamespace block.
var ErrFromNamespace = errors.New("invalid fromNamespace")

// CheckFromNamespace returns the errors of f, each naming its key: nothing to copy, a key or
// target that is not a label key, a target or prefix under vcluster.loft.sh/ or synchook.io/, a
// rename of a key that neither Keys nor Prefixes copies. Errors wrap ErrFromNamespace.
func CheckFromNamespace(f FromNamespace) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrFromNamespace}, a...)...))
	}
	if len(f.Keys) == 0 && len(f.Prefixes) == 0 {
		bad("keys or prefixes: at least one")
	}
	for i, k := range f.Keys {
		for _, msg := range validation.IsQualifiedName(k) {
			bad("keys[%d] %q: %s", i, k, msg)
		}
		if _, renamed := f.Rename[k]; !renamed && reserved(k) {
			bad("keys[%d] %q: under %s, which only vcluster and synchook write (rename it)", i, k, strings.Join(reservedPrefixes, " or "))
		}
	}
	for i, p := range f.Prefixes {
		if p == "" {
			bad("prefixes[%d]: empty (it would copy every label)", i)
		}
		for _, r := range reservedPrefixes {
			if strings.HasPrefix(p, r) || strings.HasPrefix(r, p) {
				bad("prefixes[%d] %q: would copy labels under %s, which only vcluster and synchook write", i, p, r)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(f.Rename)) {
		to := f.Rename[k]
		if !f.copies(k) {
			bad("rename[%s]: keys and prefixes do not copy %q", k, k)
		}
		for _, msg := range validation.IsQualifiedName(to) {
			bad("rename[%s] %q: %s", k, to, msg)
		}
		if reserved(to) {
			bad("rename[%s] %q: under %s, which only vcluster and synchook write", k, to, strings.Join(reservedPrefixes, " or "))
		}
	}
	return errors.Join(errs...)
}

// copies reports whether f copies the namespace label key: one of Keys, or under a Prefix.
func (f *FromNamespace) copies(key string) bool {
	return slices.Contains(f.Keys, key) || slices.ContainsFunc(f.Prefixes, func(p string) bool { return strings.HasPrefix(key, p) })
}

// reserved reports whether key is under one of reservedPrefixes.
func reserved(key string) bool {
	return slices.ContainsFunc(reservedPrefixes, func(p string) bool { return strings.HasPrefix(key, p) })
}

// labelsFor returns the labels f copies from the namespace of the object (own namespace
// namespace, annotations annotations) of hook type t, looked up in ctx's namespaces.Source:
// none when the object names no namespace (namespaces.Source.Namespace); an error without a
// Source, and one naming the namespace when it does not exist (namespaces.ErrNotFound) or
// cannot be read by ctx's end (namespaces.ErrUnknown): never the object without the labels.
// A namespace label whose value is not a label value, or whose key (renamed) is not a label
// key or is reserved, is skipped: namespace labels are tenant input.
func (f *FromNamespace) labelsFor(ctx context.Context, t hooks.HookType, namespace string, annotations map[string]string) (map[string]string, error) {
	src, ok := namespaces.From(ctx)
	if !ok {
		return nil, fmt.Errorf("fromNamespace: %w", namespaces.ErrNoSource)
	}
	_, ns, err := src.Namespace(ctx, t, namespace, annotations)
	if err != nil {
		return nil, fmt.Errorf("fromNamespace: %w", err)
	}
	if ns == nil {
		return nil, nil
	}
	out := map[string]string{}
	for k, v := range ns.Labels {
		if !f.copies(k) {
			continue
		}
		to := k
		if r, ok := f.Rename[k]; ok {
			to = r
		}
		if reserved(to) || len(validation.IsQualifiedName(to)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			continue
		}
		out[to] = v
	}
	return out, nil
}

// LabelsFuncFor returns the mutate function of the labels hook for hook type t: LabelsFunc, and
// with l.FromNamespace, first the labels it copies from the object's namespace (the hook's own
// labels win on a key both set). Errors: LabelsFunc's, and those of the namespace lookup
// (no Source in ctx, a namespace that does not exist or is not read by the hook's deadline).
func LabelsFuncFor(l Labels, t hooks.HookType) hooks.MutateFunc {
	static := LabelsFunc(l)
	if l.FromNamespace == nil {
		return static
	}
	f := *l.FromNamespace
	return func(ctx context.Context, obj client.Object) (client.Object, error) {
		add, err := f.labelsFor(ctx, t, obj.GetNamespace(), obj.GetAnnotations())
		if err != nil {
			return nil, err
		}
		if len(add) > 0 {
			if u, ok := obj.(runtime.Unstructured); ok {
				content := u.UnstructuredContent()
				if err := setStrings(content, "labels", add); err != nil {
					return nil, err
				}
				u.SetUnstructuredContent(content)
			} else {
				obj.SetLabels(merge(obj.GetLabels(), add))
			}
		}
		return static(ctx, obj)
	}
}
