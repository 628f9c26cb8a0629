// Package policyreg is where policy hooks (a config entry's policy: or policyFile:) are linked
// into a binary. It holds no CEL: package config asks it for the compiler, and
// github.com/synchook/synchook/config/policy registers synchook's (MutatingAdmissionPolicy,
// package internal/policy, which links k8s.io/apiserver and cel-go) from its init. A binary
// that does not import config/policy stays without them, and config refuses its policy hooks.
package policyreg

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
)

// Source is the policy of one config entry and what it is compiled against.
type Source struct {
	// Manifest is the entry's policy: as written; unused when File is set.
	Manifest []byte
	// File is the entry's policyFile:, a path to read the manifest from.
	File string
	// Scheme is the scheme the config is validated against (the registry's).
	Scheme *runtime.Scheme
	// Kinds are the entry's resources (those that parse), for custom resources the scheme
	// does not know.
	Kinds []schema.GroupVersionKind
	// Bindings and Params are the entry's bindings: and params:, as written (JSON).
	Bindings [][]byte
	Params   [][]byte
	// BindingsAt and ParamsAt say where each of Bindings and Params came from, for errors
	// (`bindingsFile tenants.yaml: document 2 (bindings[1])`); an index they do not reach is
	// `bindings[i]` or `params[i]`.
	BindingsAt []string
	ParamsAt   []string
	// HostParams is the program's source of params from the host cluster (package
	// paramsource; serve in a cluster and the vcluster plugin v2 set it); nil: none, the
	// entry's params are the config's only.
	HostParams HostParams
	// ParamNamespaces are the entry's hostParams.namespaces: the host namespaces its params
	// may come from; none: the host is not asked.
	ParamNamespaces []string
}

// ParamSource is where a policy finds param objects beyond the config's own: the host
// cluster's, through a watch cache (package paramsource). Every method answers for the
// request's ctx; an error is a configuration error of the binding, under the policy's
// failurePolicy. What it never gives (the tenant's objects) it treats as absent.
type ParamSource interface {
	// Namespaced reports whether the objects of kind are namespaced (the host's REST mapping);
	// an error when the host does not know kind or cannot say.
	Namespaced(ctx context.Context, kind schema.GroupVersionKind) (bool, error)
	// Get returns the object of kind named name in namespace ("" for a cluster-scoped kind),
	// nil when there is none it may give.
	Get(ctx context.Context, kind schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	// List returns the objects of kind in namespace ("" for a cluster-scoped kind) whose
	// labels selector matches, in any order.
	List(ctx context.Context, kind schema.GroupVersionKind, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error)
}

// HostParams is a program's params from the host cluster: In gives the ParamSource of one
// config entry, limited to the host namespaces the entry names.
type HostParams interface {
	In(namespaces []string) ParamSource
}

type configParamsOnlyKey struct{}

// ConfigParamsOnly returns ctx under which policies use the config's params only, never a
// ParamSource: the load-time idempotency self-test, which runs before the host is known.
func ConfigParamsOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, configParamsOnlyKey{}, true)
}

// IsConfigParamsOnly reports whether ctx came from ConfigParamsOnly.
func IsConfigParamsOnly(ctx context.Context) bool {
	v, _ := ctx.Value(configParamsOnlyKey{}).(bool)
	return v
}

// Policy is a compiled policy: what config registers hooks from.
type Policy interface {
	// Resources are the kinds the policy's rules select, in rule order.
	Resources() []schema.GroupVersionKind
	// HookTypes are the hook types the policy's rules let run on gvk.
	HookTypes(gvk schema.GroupVersionKind) []hooks.HookType
	// MutateFunc is the policy's function for hook type t.
	MutateFunc(t hooks.HookType) (hooks.MutateFunc, error)
}

// Compiler parses and compiles the policy of src. Its errors are reported as the entry's
// (hooks[i].policy or hooks[i].policyFile), and errors.Is sees through them.
type Compiler func(src Source) (Policy, error)

var compiler atomic.Pointer[Compiler]

// Register makes c the compiler of policy hooks; nil unregisters (tests). It is called from
// init, before any config is validated.
func Register(c Compiler) {
	if c == nil {
		compiler.Store(nil)
		return
	}
	compiler.Store(&c)
}

// Lookup returns the registered compiler, or nil when no package registered one: the binary
// has no policy hooks.
func Lookup() Compiler {
	if c := compiler.Load(); c != nil {
		return *c
	}
	return nil
}
