package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
)

// Key identifies one hook chain: a resource kind and a hook type.
type Key struct {
	GVK  schema.GroupVersionKind
	Type hooks.HookType
}

// String returns "<group/version>, Kind=<kind> <type>", for logs and errors.
func (k Key) String() string { return k.GVK.String() + " " + string(k.Type) }

// Registry holds every registered hook, keyed by (GVK, HookType), in registration order: what
// runs, not how. It is built once (Register every hook, then hand it to NewRunner) and is
// read-only and safe for concurrent use from then on. A Runner executes its chains.
type Registry struct {
	opts   RegistryOptions
	scheme *runtime.Scheme
	names  map[string]bool
	chains map[Key]*chain
	gvks   []schema.GroupVersionKind // in order of first registration, for Capabilities
}

// namedFunc is one link of a chain.
type namedFunc struct {
	name     string
	fn       hooks.MutateFunc
	meta     hooks.MetadataFunc // a MetadataHook's, else nil
	noUndo   bool               // Undo() is false
	revision string             // RegisterRevision: part of the chain's writer fingerprint
	builtin  bool               // RegisterBuiltin: its functions return promptly
	// strip are the paths of a strip hook (builtin.StripHook) and stripMatches its filter (nil:
	// every object), for the document path; nil for any other hook.
	strip        [][]string
	stripMatches func(namespace string, labels map[string]string) bool
}

// stripper is a hook that removes paths and can say which (builtin.StripHook).
type stripper interface {
	StripPaths() (paths [][]string, matches func(namespace string, labels map[string]string) bool)
}

// chain is the ordered list of hooks for one Key, with what it takes to decode the object once.
type chain struct {
	key   Key
	hooks []namedFunc
	// undoRead is set on a read chain (Get*) that applies the undo of its kind's write chains
	// before its hooks (RegistryOptions.Undo); it may have no hooks of its own.
	undoRead bool
	// newObject returns an empty object to decode into (Registry.NewObject), of Go type
	// objectType; unstructured says it is an *unstructured.Unstructured.
	newObject    func() client.Object
	unstructured bool
	objectType   reflect.Type
	// writers are the hooks' fingerprints (undo.WriterDigest), which the chain's seals carry.
	writers []string
}

// setObjectType sets objectType and unstructured from newObject.
func (c *chain) setObjectType() {
	obj := c.newObject()
	c.objectType = reflect.TypeOf(obj)
	_, c.unstructured = obj.(*unstructured.Unstructured)
}

// of returns a chain of c's kind (the same object to decode into) for key with hooks hs.
func (c *chain) of(key Key, hs []namedFunc) *chain {
	return &chain{key: key, hooks: hs, newObject: c.newObject, unstructured: c.unstructured, objectType: c.objectType}
}

// recordsUndo reports whether the write chain c records an undo: the registry has Undo on,
// c's hook type has a read pair and no hook of c opted out (a chain is undone whole or not at
// all: a hook whose change the tenant should see makes its whole chain visible).
func (r *Registry) recordsUndo(c *chain) bool {
	_, ok := c.key.Type.ReadOf()
	return ok && r.opts.Undo && c.every(func(h namedFunc) bool { return !h.noUndo })
}

// every reports whether c has hooks and has holds for each: the capabilities its plan is
// chosen from (planOf).
func (c *chain) every(has func(namedFunc) bool) bool {
	for _, h := range c.hooks {
		if !has(h) {
			return false
		}
	}
	return len(c.hooks) > 0
}

// inline: every hook is builtin (RegisterBuiltin), so they run on the request's goroutine
// (chain.supervise); stripOnly: every hook is a strip hook (the document path, runStripDoc);
// metadataOnly: every hook is a MetadataHook (the label/annotation path, runMetadata).
func (c *chain) inline() bool { return c.every(func(h namedFunc) bool { return h.builtin }) }

func (c *chain) stripOnly() bool { return c.every(func(h namedFunc) bool { return h.strip != nil }) }

func (c *chain) metadataOnly() bool { return c.every(func(h namedFunc) bool { return h.meta != nil }) }

// NewRegistry returns an empty Registry that resolves hook resources with scheme (nil:
// client-go's scheme, all built-in Kubernetes kinds), without automatic undo.
func NewRegistry(scheme *runtime.Scheme) *Registry {
	return NewRegistryWithOptions(RegistryOptions{Scheme: scheme})
}

// RegistryOptions configures a Registry. The zero value is NewRegistry(nil).
type RegistryOptions struct {
	// Scheme resolves hook resources and decodes typed objects. Default client-go's scheme.
	Scheme *runtime.Scheme
	// Undo makes every write chain (CreatePhysical, UpdatePhysical, CreateVirtual,
	// UpdateVirtual) record in the object's undo.Annotation how to restore exactly the object the
	// syncer sent, and the paired read type (GetPhysical, GetVirtual) of the same kind apply it
	// and remove the annotation before its own hooks run — registered for that kind even when it
	// has no hooks, so that the syncer never sees the hooks' changes coming back. A chain with a
	// hook whose Undo() is false records nothing. The synchook binary turns it on.
	Undo bool
	// MaxUndoBytes bounds the annotation's value; a change whose undo is larger fails with
	// undo.ErrTooLarge. Default undo.DefaultMaxBytes (16 KiB).
	MaxUndoBytes int
	// Provenance makes every object a host write chain (CreatePhysical, UpdatePhysical) changed
	// carry undo.ProvenanceAnnotation: one "hook@version#sha" per hook that changed it, sha the first 8 hex digits of the SHA-256 of
	// that hook's own JSON Patch. With Undo it is taken off again on the way back like any
	// change. It costs an encode per hook: off by default.
	Provenance bool
	// Version is the build's version in undo.ProvenanceAnnotation, and the revision of every hook
	// registered without one (RegisterRevision). Default "dev".
	Version string
	// Keys holds the key ring that seals and opens undo annotations (package undo).
	// Nil, or a Keeper without a Ring: no key — a write chain whose change must record an undo
	// is refused (undo.ErrNeedsKey) and a read applies none. The Keeper may get its Ring after
	// the Registry is built (a vcluster plugin v2 reads it at Initialize).
	Keys *undo.Keeper
}

// NewRegistryWithOptions returns an empty Registry configured by opts.
func NewRegistryWithOptions(opts RegistryOptions) *Registry {
	if opts.Scheme == nil {
		opts.Scheme = clientgoscheme.Scheme
	}
	if opts.MaxUndoBytes <= 0 {
		opts.MaxUndoBytes = undo.DefaultMaxBytes
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	return &Registry{opts: opts, scheme: opts.Scheme, names: map[string]bool{}, chains: map[Key]*chain{}}
}

// Scheme returns the scheme the Registry decodes typed objects with.
func (r *Registry) Scheme() *runtime.Scheme { return r.scheme }

// Register adds h to the end of the chain of every hook type it implements, for the GVK of
// h.Resource(). It fails when the name is empty or already registered, when the GVK cannot be
// resolved (a typed object the scheme does not know, or an Unstructured without apiVersion and
// kind), or when h implements none of the eight hook types.
func (r *Registry) Register(h hooks.ClientHook) error {
	return r.RegisterRevision(h, r.opts.Version)
}

// RegisterRevision is Register with the hook's revision: a text that changes whenever what
// the hook does changes (package config passes a digest of the hook's entry; Register passes
// the build's Version). A sealed undo records the fingerprint of its chain's names and
// revisions; a read applies all of it only when the kind's Update chain still has that
// fingerprint (undo.Rule.Rewriters).
func (r *Registry) RegisterRevision(h hooks.ClientHook, revision string) error {
	return r.register(h, revision, false)
}

// RegisterBuiltin is RegisterRevision for a hook of synchook's own whose functions return
// promptly whatever the object: no I/O, no waiting, time linear in the object's labels and
// annotations (package config's labels and strip hooks). A chain made only of such hooks runs
// them on the request's own goroutine (chain.supervise): a hook that could block runs on a
// goroutine of its own, which the request abandons at its deadline, and starting it (and
// waking a thread to run it) costs more than a labels hook. The request's slot and its
// deadline hold either way: an answer not ready by the deadline is not given (call.runWhole).
// Its functions get the request's context as it is: no logger in it and no HookTimeout of their
// own (call.hookCall), which could not stop a call on the request's goroutine anyway.
func (r *Registry) RegisterBuiltin(h hooks.ClientHook, revision string) error {
	return r.register(h, revision, true)
}

func (r *Registry) register(h hooks.ClientHook, revision string, builtin bool) error {
	name := h.Name()
	if name == "" {
		return errors.New("register hook: empty name")
	}
	if r.names[name] {
		return fmt.Errorf("register hook %q: a hook with this name is already registered", name)
	}
	gvk, err := r.resolveGVK(h.Resource())
	if err != nil {
		return fmt.Errorf("register hook %q: %w", name, err)
	}
	funcs, err := hooks.Funcs(h)
	if err != nil {
		return fmt.Errorf("register hook %q: %w", name, err)
	}
	if len(funcs) == 0 {
		return fmt.Errorf("register hook %q: it implements none of the hook types (%s)", name, hooks.ValidHookTypes())
	}
	var meta hooks.MetadataFunc
	if mh, ok := h.(hooks.MetadataHook); ok {
		meta = mh.MetadataFunc()
	}
	recordsUndo := true
	if u, ok := h.(hooks.Undoer); ok {
		recordsUndo = u.Undo()
	}
	for _, t := range hooks.AllHookTypes() {
		fn, ok := funcs[t]
		if !ok || fn == nil {
			continue
		}
		c := r.chainOf(Key{GVK: gvk, Type: t})
		if err := undoAgrees(c, name, !recordsUndo); err != nil {
			return err
		}
		nf := namedFunc{name: name, fn: fn, meta: meta, noUndo: !recordsUndo, revision: revision, builtin: builtin}
		if sh, ok := h.(stripper); ok && builtin {
			nf.strip, nf.stripMatches = sh.StripPaths()
		}
		c.hooks = append(c.hooks, nf)
		c.writers = append(c.writers, undo.WriterDigest(name, revision))
		if read, ok := t.ReadOf(); ok && r.opts.Undo && recordsUndo {
			r.chainOf(Key{GVK: gvk, Type: read}).undoRead = true
		}
	}
	r.names[name] = true
	return nil
}

// ErrUndoDisagrees is wrapped by the error of Register for a hook whose undo (hooks.Undoer)
// differs from that of a hook already in one of its write chains.
var ErrUndoDisagrees = errors.New("hooks of one chain disagree on undo")

// undoAgrees returns an error wrapping ErrUndoDisagrees when the write chain c (a hook type with
// a read that undoes it) holds a hook whose undo differs from noUndo, that of the hook name
// being registered: undo is per chain, so one hook's Undo() false would leave every other
// hook's change in the read.
func undoAgrees(c *chain, name string, noUndo bool) error {
	if _, ok := c.key.Type.ReadOf(); !ok {
		return nil
	}
	for _, h := range c.hooks {
		if h.noUndo != noUndo {
			return fmt.Errorf("register hook %q: %w: on %s %s, hook %q has Undo() %t and this one %t: "+
				"undo is per chain, so the read would keep the changes of every hook of the chain; "+
				"give both the same Undo() or register them for different kinds or hook types",
				name, ErrUndoDisagrees, c.key.GVK, c.key.Type, h.name, !h.noUndo, !noUndo)
		}
	}
	return nil
}

// CoverUndoReads registers the read type of each of kinds (GetPhysical for the physical side,
// GetVirtual for the virtual one) as an undo read, with no hooks, when the kind has no such
// chain: so that undos sealed by an earlier config or build keep being taken off after their
// hooks were removed (a sealed undo applies whatever is configured now). Like Register it must
// be called before the Registry serves. It returns the keys it added.
func (r *Registry) CoverUndoReads(kinds []undo.Kind) []Key {
	if !r.opts.Undo {
		return nil
	}
	var added []Key
	for _, k := range kinds {
		key := Key{GVK: k.GVK, Type: hooks.HookTypeOf(k.Side, hooks.OpGet)}
		if r.chains[key] == nil {
			added = append(added, key)
		}
		r.chainOf(key).undoRead = true
	}
	return added
}

// chainOf returns the chain of key, made without hooks when there is none yet.
func (r *Registry) chainOf(key Key) *chain {
	if c := r.chains[key]; c != nil {
		return c
	}
	gvk := key.GVK
	c := &chain{key: key, newObject: func() client.Object { return r.NewObject(gvk) }}
	c.setObjectType()
	r.chains[key] = c
	if !slices.Contains(r.gvks, gvk) {
		r.gvks = append(r.gvks, gvk)
	}
	return c
}

// Keeper returns the undo key Keeper (RegistryOptions.Keys), nil when none was given.
func (r *Registry) Keeper() *undo.Keeper { return r.opts.Keys }

// MustRegister is Register that panics on error, for hooks compiled into main.
func (r *Registry) MustRegister(hs ...hooks.ClientHook) {
	for _, h := range hs {
		if err := r.Register(h); err != nil {
			panic(err)
		}
	}
}

// resolveGVK returns the GVK of a hook's Resource: from the object itself for Unstructured,
// from the scheme for typed objects.
func (r *Registry) resolveGVK(obj client.Object) (schema.GroupVersionKind, error) {
	if obj == nil {
		return schema.GroupVersionKind{}, errors.New("Resource() returned nil")
	}
	if u, ok := obj.(runtime.Unstructured); ok {
		gvk := u.GetObjectKind().GroupVersionKind()
		if gvk.Version == "" || gvk.Kind == "" {
			return gvk, errors.New("Resource() is Unstructured without apiVersion and kind")
		}
		return gvk, nil
	}
	gvk, err := apiutil.GVKForObject(obj, r.scheme)
	if err != nil {
		return gvk, fmt.Errorf("resolve GVK of %T: %w", obj, err)
	}
	return gvk, nil
}

// NewObject returns an empty object of gvk to decode into: the scheme's typed object when the
// scheme knows gvk, else an *unstructured.Unstructured with apiVersion and kind set.
func (r *Registry) NewObject(gvk schema.GroupVersionKind) client.Object {
	if obj, err := r.scheme.New(gvk); err == nil {
		if co, ok := obj.(client.Object); ok {
			return co
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Has reports whether any hook is registered for (gvk, t). It is the transports' fast path:
// no hooks means no decode and no patch.
func (r *Registry) Has(gvk schema.GroupVersionKind, t hooks.HookType) bool {
	return r.chains[Key{GVK: gvk, Type: t}] != nil
}

// Keys returns every (GVK, HookType) that has at least one hook, GVKs in order of first
// registration and hook types in canonical order.
func (r *Registry) Keys() []Key {
	var keys []Key
	for _, gvk := range r.gvks {
		for _, t := range hooks.AllHookTypes() {
			if key := (Key{GVK: gvk, Type: t}); r.chains[key] != nil {
				keys = append(keys, key)
			}
		}
	}
	return keys
}

// ObjectGVK returns the GVK named by the apiVersion and kind of a JSON object, or an error when
// either is missing or the JSON is malformed.
func ObjectGVK(objectJSON []byte) (schema.GroupVersionKind, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(objectJSON, &tm); err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("read apiVersion and kind: %w", err)
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return schema.GroupVersionKind{}, errors.New("object has no apiVersion and kind")
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", tm.APIVersion, err)
	}
	return gv.WithKind(tm.Kind), nil
}

// Capabilities describes what a Registry serves, as returned by GET /capabilities.
type Capabilities struct {
	// Resources lists one entry per GVK, in order of first registration.
	Resources []ResourceCapabilities `json:"resources"`
}

// ResourceCapabilities lists the hook types of one GVK and, for each, its hook names in chain
// order.
type ResourceCapabilities struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// HookTypes lists the hook types that have hooks, in canonical order.
	HookTypes []HookTypeCapabilities `json:"hookTypes"`
}

// HookTypeCapabilities names the hooks of one hook type, in chain order.
type HookTypeCapabilities struct {
	Type  hooks.HookType `json:"type"`
	Hooks []string       `json:"hooks"`
}

// Capabilities returns GVK → hook types → hook names for every registered hook.
func (r *Registry) Capabilities() Capabilities {
	caps := Capabilities{Resources: []ResourceCapabilities{}}
	for _, gvk := range r.gvks {
		apiVersion, kind := gvk.ToAPIVersionAndKind()
		rc := ResourceCapabilities{APIVersion: apiVersion, Kind: kind}
		for _, t := range hooks.AllHookTypes() {
			c := r.chains[Key{GVK: gvk, Type: t}]
			if c == nil {
				continue
			}
			names := make([]string, 0, len(c.hooks)+1)
			if c.undoRead {
				names = append(names, undo.Annotation)
			}
			for _, h := range c.hooks {
				names = append(names, h.name)
			}
			rc.HookTypes = append(rc.HookTypes, HookTypeCapabilities{Type: t, Hooks: names})
		}
		caps.Resources = append(caps.Resources, rc)
	}
	return caps
}
