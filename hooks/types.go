package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HookType is one of the eight interception points. Its string value is the exact wire string
// used in URLs (/mutate/{hookType}), in config and in the vcluster plugin protocol.
type HookType string

// The eight hook types. Create/Update/Delete run before the syncer writes the object;
// Get runs after it reads one (a List counts as a Get per item).
const (
	CreatePhysical HookType = "CreatePhysical"
	UpdatePhysical HookType = "UpdatePhysical"
	DeletePhysical HookType = "DeletePhysical"
	GetPhysical    HookType = "GetPhysical"
	CreateVirtual  HookType = "CreateVirtual"
	UpdateVirtual  HookType = "UpdateVirtual"
	DeleteVirtual  HookType = "DeleteVirtual"
	GetVirtual     HookType = "GetVirtual"
)

// ErrUnknownHookType is wrapped by every error about a hook type string that is not one of
// the eight; test for it with errors.Is.
var ErrUnknownHookType = errors.New("unknown hook type")

// MutateFunc is the shape of every Mutate method: it receives the object (typed, or
// *unstructured.Unstructured for kinds the scheme does not know) and returns the object to pass
// on, which may be the same pointer mutated in place or a new object of the same kind.
type MutateFunc func(ctx context.Context, obj client.Object) (client.Object, error)

// ClientHook is the base of every hook. Name must be unique in a Registry; Resource returns an
// empty object of the kind the hook handles (e.g. &corev1.Pod{}, or an
// *unstructured.Unstructured with apiVersion and kind set for a custom resource).
//
// A hook is called concurrently: by concurrent requests, and for the items of one List, which
// run in parallel. Each call gets its own object; state a hook keeps across calls needs its
// own locking.
type ClientHook interface {
	Name() string
	Resource() client.Object
}

// MutateCreatePhysical is implemented by hooks that change an object before the syncer creates
// it in the host cluster.
type MutateCreatePhysical interface {
	MutateCreatePhysical(ctx context.Context, obj client.Object) (client.Object, error)
}

// MutateUpdatePhysical is implemented by hooks that change an object before the syncer updates
// it in the host cluster.
type MutateUpdatePhysical interface {
	MutateUpdatePhysical(ctx context.Context, obj client.Object) (client.Object, error)
}

// MutateDeletePhysical is implemented by hooks that see an object before the syncer deletes it
// from the host cluster.
type MutateDeletePhysical interface {
	MutateDeletePhysical(ctx context.Context, obj client.Object) (client.Object, error)
}

// MutateGetPhysical is implemented by hooks that change an object after the syncer reads it
// from the host cluster.
type MutateGetPhysical interface {
	MutateGetPhysical(ctx context.Context, obj client.Object) (client.Object, error)
}

// MutateCreateVirtual is implemented by hooks that change an object before the syncer creates
// it in the virtual cluster.
type MutateCreateVirtual interface {
	MutateCreateVirtual(ctx context.Context, obj client.Object) (client.Object, error)
}

// MutateUpdateVirtual is implemented by hooks that change an object before the syncer updates
// it in the virtual cluster.
type MutateUpdateVirtual interface {
	MutateUpdateVirtual(ctx context.Context, obj client.Object) (client.Object, error)
}

// MutateDeleteVirtual is implemented by hooks that see an object before the syncer deletes it
// from the virtual cluster.
type MutateDeleteVirtual interface {
	MutateDeleteVirtual(ctx context.Context, obj client.Object) (client.Object, error)
}

// MutateGetVirtual is implemented by hooks that change an object after the syncer reads it from
// the virtual cluster.
type MutateGetVirtual interface {
	MutateGetVirtual(ctx context.Context, obj client.Object) (client.Object, error)
}

// FuncHook is implemented by hooks that choose their hook types at run time (the config-driven
// built-in hooks, test fakes). When a hook implements it, the Registry uses MutateFuncs instead
// of looking for the eight interfaces.
type FuncHook interface {
	ClientHook
	MutateFuncs() map[HookType]MutateFunc
}

// hookTypeTable is the one table that maps every hook type to its interface. Both discovery
// (Registry.Register) and execution (Runner.Mutate) go through it; AllHookTypes is its order.
var hookTypeTable = [...]struct {
	typ  HookType
	bind func(ClientHook) MutateFunc
}{
	{CreatePhysical, bind(MutateCreatePhysical.MutateCreatePhysical)},
	{UpdatePhysical, bind(MutateUpdatePhysical.MutateUpdatePhysical)},
	{DeletePhysical, bind(MutateDeletePhysical.MutateDeletePhysical)},
	{GetPhysical, bind(MutateGetPhysical.MutateGetPhysical)},
	{CreateVirtual, bind(MutateCreateVirtual.MutateCreateVirtual)},
	{UpdateVirtual, bind(MutateUpdateVirtual.MutateUpdateVirtual)},
	{DeleteVirtual, bind(MutateDeleteVirtual.MutateDeleteVirtual)},
	{GetVirtual, bind(MutateGetVirtual.MutateGetVirtual)},
}

// bind turns a method expression of one of the eight interfaces into a function that returns
// the hook's bound method, or nil when the hook does not implement that interface.
func bind[I any](method func(I, context.Context, client.Object) (client.Object, error)) func(ClientHook) MutateFunc {
	return func(h ClientHook) MutateFunc {
		impl, ok := h.(I)
		if !ok {
			return nil
		}
		return func(ctx context.Context, obj client.Object) (client.Object, error) {
			return method(impl, ctx, obj)
		}
	}
}

// AllHookTypes returns the eight hook types in their canonical order (Physical before Virtual;
// Create, Update, Delete, Get).
func AllHookTypes() []HookType {
	out := make([]HookType, len(hookTypeTable))
	for i, e := range hookTypeTable {
		out[i] = e.typ
	}
	return out
}

// ParseHookType returns the HookType whose wire string is s (case-sensitive). Any other string
// gives an error that wraps ErrUnknownHookType and lists the valid ones.
func ParseHookType(s string) (HookType, error) {
	for _, e := range hookTypeTable {
		if string(e.typ) == s {
			return e.typ, nil
		}
	}
	return "", fmt.Errorf("%w %q (valid: %s)", ErrUnknownHookType, s, ValidHookTypes())
}

// ValidHookTypes returns the eight wire strings joined by ", ", for error messages.
func ValidHookTypes() string {
	names := make([]string, len(hookTypeTable))
	for i, e := range hookTypeTable {
		names[i] = string(e.typ)
	}
	return strings.Join(names, ", ")
}

// Valid reports whether t is one of the eight hook types.
func (t HookType) Valid() bool {
	_, err := ParseHookType(string(t))
	return err == nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseHookType, so JSON and YAML
// config reject unknown hook types.
func (t *HookType) UnmarshalText(b []byte) error {
	parsed, err := ParseHookType(string(b))
	if err != nil {
		return err
	}
	*t = parsed
	return nil
}

// Funcs returns the hook types h implements and the function of each: FuncHook.MutateFuncs
// when h has it, else the methods of the eight MutateXxx interfaces h implements (one table,
// hookTypeTable, for every hook type). Error: a FuncHook that names an unknown hook type
// (wraps ErrUnknownHookType). An empty map means h implements none.
func Funcs(h ClientHook) (map[HookType]MutateFunc, error) {
	if fh, ok := h.(FuncHook); ok {
		funcs := fh.MutateFuncs()
		for t := range funcs {
			if !t.Valid() {
				_, err := ParseHookType(string(t))
				return nil, err
			}
		}
		return funcs, nil
	}
	funcs := map[HookType]MutateFunc{}
	for _, e := range hookTypeTable {
		if fn := e.bind(h); fn != nil {
			funcs[e.typ] = fn
		}
	}
	return funcs, nil
}
