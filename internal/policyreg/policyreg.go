// Package policyreg is where policy hooks (a config entry's policy: or policyFile:) are linked
// into a binary. It holds no CEL: package config asks it for the compiler, and
// github.com/synchook/synchook/config/policy registers synchook's (MutatingAdmissionPolicy,
// package internal/policy, which links k8s.io/apiserver and cel-go) from its init. A binary
// that does not import config/policy stays without them, and config refuses its policy hooks.
package policyreg

import (
	"sync/atomic"

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
