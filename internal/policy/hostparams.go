package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/policyreg"
)

// ParamSource is where a policy finds params beyond the config's (Options.ParamSource): the
// host cluster's objects, through a watch cache (package paramsource).
type ParamSource = policyreg.ParamSource

// paramsOf returns the params that b's paramRef selects for a request in namespace, by
// namespace then name, and the namespace they were looked for in ("" for a cluster-scoped
// paramKind): the config's params and, unless ctx is policyreg.ConfigParamsOnly (the
// load-time self-test), those of the policy's ParamSource; a config param shadows a source
// object of the same namespace and name. The scope of paramKind is the config params' or,
// with a ParamSource, the host's (both: they must agree). Its errors wrap ErrParamConfig: a
// namespaced paramRef without a namespace on a cluster-scoped request, a paramRef.namespace
// for a cluster-scoped paramKind, and whatever the ParamSource fails with (an unsynced cache,
// a forbidden read, a paramKind the host does not know).
func (p *Policy) paramsOf(ctx context.Context, b *binding, namespace string) ([]*unstructured.Unstructured, string, error) {
	src := p.params
	if policyreg.IsConfigParamsOnly(ctx) {
		src = nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: binding %q: "+format, append([]any{ErrParamConfig, b.name}, args...)...)
	}
	gvk := schema.FromAPIVersionAndKind(p.paramKind.APIVersion, p.paramKind.Kind)
	cluster := b.cluster
	if src != nil {
		namespaced, err := src.Namespaced(ctx, gvk)
		if err != nil {
			return nil, "", fail("params from the host cluster: %w", err)
		}
		if len(b.params) > 0 && b.cluster == namespaced {
			return nil, "", fail("the config's params of paramKind %s are %s, the host cluster's %s", gvk, scopeText(b.cluster), scopeText(!namespaced))
		}
		cluster = !namespaced
	}
	ns := ""
	if cluster {
		if b.ref.Namespace != "" {
			return nil, "", fail("paramRef.namespace must not be provided for a cluster-scoped paramKind %s", gvk)
		}
	} else {
		ns = cmp.Or(b.ref.Namespace, namespace)
		if ns == "" {
			return nil, "", fail("paramRef.namespace is empty and the request is cluster-scoped: cannot use a namespaced paramRef for a cluster-scoped object")
		}
	}
	var out []*unstructured.Unstructured
	for _, o := range b.params {
		if o.GetNamespace() != ns {
			continue
		}
		if b.selector != nil && !b.selector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		if b.selector == nil && o.GetName() != b.ref.Name {
			continue
		}
		out = append(out, o)
	}
	if src == nil {
		return out, ns, nil
	}
	var host []*unstructured.Unstructured
	if b.selector == nil {
		o, err := src.Get(ctx, gvk, ns, b.ref.Name)
		if err != nil {
			return nil, "", fail("params from the host cluster: %w", err)
		}
		if o != nil {
			host = append(host, o)
		}
	} else {
		l, err := src.List(ctx, gvk, ns, b.selector)
		if err != nil {
			return nil, "", fail("params from the host cluster: %w", err)
		}
		host = l
	}
	for _, o := range host {
		shadowed := slices.ContainsFunc(out, func(c *unstructured.Unstructured) bool {
			return c.GetNamespace() == o.GetNamespace() && c.GetName() == o.GetName()
		})
		if !shadowed {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
			return c
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
	return out, ns, nil
}

// scopeText names a paramKind's scope.
func scopeText(cluster bool) string {
	if cluster {
		return "cluster-scoped"
	}
	return "namespaced"
}
