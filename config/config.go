package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/policyreg"
)

// ErrInvalid is wrapped by every error about the content of a config (syntax, unknown keys,
// validation, registration of its hooks), so that callers can tell a bad config (exit code 2)
// from other failures with errors.Is.
var ErrInvalid = errors.New("invalid synchook config")

// invalidError is an error about the content of a config: its problems as one
// utilerrors.Aggregate (for validation, a field.ErrorList's ToAggregate), prefixed with
// ErrInvalid's text. errors.Is finds ErrInvalid, each problem, and the errors behind some of
// them (hooks.ErrUnknownHookType, builtin.ErrInvalidPointer, …), which field.Error cannot wrap.
type invalidError struct {
	agg    utilerrors.Aggregate
	causes []error
}

func (e *invalidError) Error() string { return ErrInvalid.Error() + ": " + e.agg.Error() }

func (e *invalidError) Unwrap() []error { return append([]error{ErrInvalid, e.agg}, e.causes...) }

// invalid returns agg with causes as an *invalidError, or nil when agg is nil (no problems).
func invalid(agg utilerrors.Aggregate, causes ...error) error {
	if agg == nil {
		return nil
	}
	return &invalidError{agg: agg, causes: causes}
}

// Config is synchook's configuration: the built-in hooks to register, in order.
type Config struct {
	// Provenance, when true, makes every object a chain changed carry the annotation
	// synchook.io/mutated-by naming each hook that changed it (undo.ProvenanceAnnotation).
	// Default false.
	Provenance bool `json:"provenance,omitempty"`
	// Hooks are the hook entries; each registers one hook per resource.
	Hooks []Hook `json:"hooks"`
	// Settings are the settings of the program's Go hooks, as JSON: the value of the
	// document's settings key, kept as it was written (numbers and booleans stay so), for
	// DecodeSettings (plugin.UnmarshalConfig) to decode into the hook author's type. Nil when
	// the key is absent. synchook itself never reads them.
	Settings json.RawMessage `json:"settings,omitempty"`
	// source is where the config came from (Load; zero: inline), which says where its
	// relative files are (Source.resolve).
	source Source
	// readFile reads the files the config names (Reader.ReadFile); nil: the policy compiler
	// reads them.
	readFile func(string) ([]byte, error)
	// hostParams is BuildWith's BuildOptions.HostParams.
	hostParams policyreg.HostParams
	// extraParams are the params every policy entry gets after its own (AddParams);
	// extraBindings the bindings the entry of the policy each names gets (AddBindings).
	extraParams, extraBindings []extraObject
}

// Hook is one entry of the config: one built-in hook (labels or strip, exactly one), the
// resources and hook types it runs on and an optional filter.
type Hook struct {
	// Name is the hook's name; empty means "labels-<index>" or "strip-<index>".
	Name string `json:"name,omitempty"`
	// Resources are the kinds of object the hook handles.
	Resources []Resource `json:"resources"`
	// Types are the hook types the hook runs on.
	Types []hooks.HookType `json:"types"`
	// Namespaces, when set, limits the hook to objects in these namespaces.
	Namespaces []string `json:"namespaces,omitempty"`
	// ObjectSelector, when set, limits the hook to objects whose labels match it.
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
	// Labels are the settings of the labels hook.
	Labels *builtin.Labels `json:"labels,omitempty"`
	// Strip are the settings of the strip hook.
	Strip *builtin.Strip `json:"strip,omitempty"`
	// Image are the settings of the image hook (registry and repository prefix rewrites of
	// container images; builtin.ImageFuncs).
	Image *builtin.Image `json:"image,omitempty"`
	// Policy is a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1) exactly as one
	// would kubectl apply it, run as this hook (package policy). Resources default to the kinds
	// its spec.matchConstraints.resourceRules select; types run where its rules' operations
	// allow (CREATE: Create*, UPDATE: Update*, DELETE: Delete*, any: Get*). Policy hooks are
	// linked into a binary only when it imports github.com/synchook/synchook/config/policy
	// (the synchook binary does); without it, validation refuses the entry.
	Policy *json.RawMessage `json:"policy,omitempty"`
	// PolicyFile is the path of a file holding such a policy, instead of Policy: absolute, or
	// relative to the directory of the config file (Load); a config given inline (an
	// environment variable, Parse) refuses a relative one.
	PolicyFile string `json:"policyFile,omitempty"`
	// Bindings are MutatingAdmissionPolicyBindings (admissionregistration.k8s.io/v1) of the
	// entry's policy, as they would be applied to a cluster, each with spec.policyName the
	// policy's metadata.name; none: the policy is bound once, with params null. Only with
	// Policy or PolicyFile.
	Bindings []json.RawMessage `json:"bindings,omitempty"`
	// Params are the param objects (any apiVersion and kind; those of the policy's
	// spec.paramKind are used) that the bindings' paramRefs select from. Only with Policy or
	// PolicyFile.
	Params []json.RawMessage `json:"params,omitempty"`
	// BindingsFile and ParamsFile are the paths of files holding the bindings and the params
	// instead of Bindings and Params (one or the other): YAML, every document one object or a
	// v1 List of them, resolved as PolicyFile is (docs/config.md, "Params and bindings").
	// Only with Policy or PolicyFile.
	BindingsFile string `json:"bindingsFile,omitempty"`
	ParamsFile   string `json:"paramsFile,omitempty"`
	// HostParams, when set, lets the bindings' paramRefs select params from the host cluster
	// too, where the program has one (serve in a cluster, the vcluster plugin v2; BuildWith's
	// HostParams), from the namespaces it names only (docs/config.md, "Params from the host
	// cluster"). Only with Policy or PolicyFile.
	HostParams *HostParams `json:"hostParams,omitempty"`
	// compiled is the compiled Policy or PolicyFile, set by validate.
	compiled policyreg.Policy
	// policyPath is the path PolicyFile names, resolved against the config's source (set by
	// validate).
	policyPath string
	// policyData is the content of the PolicyFile when the config's Reader read it (set by
	// validate).
	policyData []byte
	// filesData are the contents of BindingsFile and ParamsFile (set by validate), part of the
	// entry's revision.
	filesData [][]byte
	// Undo, when false, keeps the hook's change visible on the way back up: its chains record no
	// synchook.io/undo (README, "automatic undo"). Default true. Undo is per chain: every entry
	// of a chain (a GVK and a write hook type) must have the same (validate refuses others).
	Undo *bool `json:"undo,omitempty"`
}

// HostParams are the settings of an entry's params from the host cluster.
type HostParams struct {
	// Namespaces are the host namespaces params may come from (required, at least one): a
	// paramRef's namespace (or the request's, its default) outside them finds no param. Never
	// the vcluster's own host namespace, and never an object vcluster synced, whatever is
	// listed (docs/guarantees.md).
	Namespaces []string `json:"namespaces"`
}

// undo reports whether the entry's change is undone: its undo, true when unset.
func (h *Hook) undo() bool { return h.Undo == nil || *h.Undo }

// undoText describes the entry's undo for an error: "undo: false", "undo: true" or "undo
// unset (true)".
func (h *Hook) undoText() string {
	if h.Undo == nil {
		return "undo unset (true)"
	}
	return "undo: " + strconv.FormatBool(*h.Undo)
}

// Resource names a kind of object by apiVersion ("v1", "apps/v1", "example.com/v1alpha1") and
// kind ("Pod").
type Resource struct {
	// APIVersion is "<group>/<version>", or "<version>" for the core group.
	APIVersion string `json:"apiVersion"`
	// Kind is the kind, in the case the API uses ("Pod", "Deployment").
	Kind string `json:"kind"`
}

// GroupVersionKind returns the GVK of r. It fails when apiVersion cannot be parsed.
func (r Resource) GroupVersionKind() (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gv.WithKind(r.Kind), nil
}

// String returns "<apiVersion> <kind>", e.g. "apps/v1 Deployment".
func (r Resource) String() string { return r.APIVersion + " " + r.Kind }

// DefaultHookName is the name of the hook in Default.
const DefaultHookName = "default-labels"

// DefaultLabel is the label that the Default config adds to Pods.
const DefaultLabel = "synchook.io/hooked"

// Default returns the config used when none is given: one labels hook, "default-labels", that
// adds the label synchook.io/hooked: "true" to v1 Pods on CreatePhysical and UpdatePhysical,
// so that Pods written to the host cluster through synchook can be told apart.
func Default() *Config {
	return &Config{Hooks: []Hook{{
		Name:      DefaultHookName,
		Resources: []Resource{{APIVersion: "v1", Kind: "Pod"}},
		Types:     []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical},
		Labels:    &builtin.Labels{Labels: map[string]string{DefaultLabel: "true"}},
	}}}
}

// kindOfHook returns "labels" or "strip", or "hook" when the entry sets neither or both.
func (h *Hook) kindOfHook() string {
	switch {
	case h.Labels != nil && h.Strip == nil:
		return "labels"
	case h.Strip != nil && h.Labels == nil:
		return "strip"
	case h.Policy != nil || h.PolicyFile != "":
		return "policy"
	case h.Image != nil:
		return "image"
	default:
		return "hook"
	}
}

// name returns the entry's name, or its default for index i.
func (h *Hook) name(i int) string {
	if h.Name != "" {
		return h.Name
	}
	return h.kindOfHook() + "-" + strconv.Itoa(i)
}

// hookNames returns the names that entry i registers, one per resource: the entry name, or
// "<name>/<Kind>" when it has several resources.
func (h *Hook) hookNames(i int) []string {
	name := h.name(i)
	if len(h.Resources) <= 1 {
		return []string{name}
	}
	names := make([]string, len(h.Resources))
	for j, r := range h.Resources {
		names[j] = name + "/" + r.Kind
	}
	return names
}

// Build validates c against the registry's scheme and registers one hook per (entry, resource)
// in config order. The resource of a hook is the scheme's typed object when the scheme knows
// the kind, else an *unstructured.Unstructured with apiVersion and kind set. Errors wrap
// ErrInvalid; when registration fails part-way (e.g. a name that main already registered), the
// hooks before the failing one stay registered.
func (c *Config) Build(reg *engine.Registry) error {
	return c.BuildWith(reg, BuildOptions{})
}

// BuildOptions are what a program gives Build beyond the config.
type BuildOptions struct {
	// HostParams is where policy entries with hostParams find params in the host cluster
	// (package paramsource); nil: those entries use their config params only (synchook test,
	// mutate, replay).
	HostParams policyreg.HostParams
}

// BuildWith is Build with o.
func (c *Config) BuildWith(reg *engine.Registry, o BuildOptions) error {
	c.hostParams = o.HostParams
	if err := c.validate(reg.Scheme()); err != nil {
		return err
	}
	for i := range c.Hooks {
		h := &c.Hooks[i]
		if h.compiled != nil {
			if err := h.buildPolicy(reg, i); err != nil {
				return fmt.Errorf("%w: hooks[%d]: %w", ErrInvalid, i, err)
			}
			continue
		}
		if h.Image != nil || h.Labels != nil && h.Labels.FromNamespace != nil {
			if err := h.buildPerType(reg, i); err != nil {
				return fmt.Errorf("%w: hooks[%d]: %w", ErrInvalid, i, err)
			}
			continue
		}
		fn, err := h.mutateFunc()
		if err != nil { // validate checked all of this; kept for safety
			return fmt.Errorf("%w: hooks[%d]: %w", ErrInvalid, i, err)
		}
		meta, err := h.metadataFunc()
		if err != nil {
			return fmt.Errorf("%w: hooks[%d]: %w", ErrInvalid, i, err)
		}
		names := h.hookNames(i)
		for j, r := range h.Resources {
			gvk, err := r.GroupVersionKind()
			if err != nil {
				return fmt.Errorf("%w: hooks[%d].resources[%d]: %w", ErrInvalid, i, j, err)
			}
			var hook hooks.ClientHook = hooks.NewFunc(names[j], reg.NewObject(gvk), h.Types, fn)
			switch {
			case meta != nil:
				hook = hooks.NewMetadataFunc(names[j], reg.NewObject(gvk), h.Types, fn, meta)
			case h.Strip != nil: // may run on the object's JSON (the registry's document path)
				f := builtin.Filter{Namespaces: h.Namespaces, ObjectSelector: h.ObjectSelector}
				if hook, err = builtin.NewStripHook(names[j], reg.NewObject(gvk), h.Types, *h.Strip, f); err != nil {
					return fmt.Errorf("%w: hooks[%d]: %w", ErrInvalid, i, err)
				}
			}
			if h.Undo != nil && !*h.Undo {
				hook = noUndo{hook}
			}
			// labels and strip: synchook's own functions, which return promptly
			if err := reg.RegisterBuiltin(hook, h.revision()); err != nil {
				return fmt.Errorf("%w: hooks[%d].resources[%d]: %w", ErrInvalid, i, j, err)
			}
		}
	}
	return nil
}

// buildPerType registers the hook of entry i whose function depends on the hook type (image,
// and labels with fromNamespace, whose namespace rule differs between physical and virtual
// types), one per resource, behind the entry's filter. Neither runs on the label/annotation
// fast path.
func (h *Hook) buildPerType(reg *engine.Registry, i int) error {
	names := h.hookNames(i)
	for j, r := range h.Resources {
		gvk, err := r.GroupVersionKind()
		if err != nil {
			return fmt.Errorf("resources[%d]: %w", j, err)
		}
		funcs := map[hooks.HookType]hooks.MutateFunc{}
		if h.Image != nil {
			if funcs, err = builtin.ImageFuncs(names[j], *h.Image, h.Types); err != nil {
				return err
			}
		} else {
			for _, t := range h.Types {
				funcs[t] = builtin.LabelsFuncFor(*h.Labels, t)
			}
		}
		for t, fn := range funcs {
			if funcs[t], err = builtin.Filtered(builtin.Filter{Namespaces: h.Namespaces, ObjectSelector: h.ObjectSelector}, fn); err != nil {
				return err
			}
		}
		var hook hooks.ClientHook = hooks.NewFuncs(names[j], reg.NewObject(gvk), funcs)
		if h.Undo != nil && !*h.Undo {
			hook = noUndo{hook}
		}
		if err := reg.RegisterBuiltin(hook, h.revision()); err != nil { // synchook's own functions
			return fmt.Errorf("resources[%d]: %w", j, err)
		}
	}
	return nil
}

// metadataFunc builds the entry's function for the label/annotation fast path, filter
// included: for labels, and for strip when every path is a label or annotation key; nil for
// the rest.
func (h *Hook) metadataFunc() (hooks.MetadataFunc, error) {
	var fn hooks.MetadataFunc
	switch {
	case h.Labels != nil && h.Strip == nil:
		fn = builtin.LabelsMetadataFunc(*h.Labels)
	case h.Strip != nil && h.Labels == nil:
		var ok bool
		if fn, ok = builtin.StripMetadataFunc(*h.Strip); !ok {
			return nil, nil
		}
	default:
		return nil, nil
	}
	return builtin.FilteredMetadata(builtin.Filter{Namespaces: h.Namespaces, ObjectSelector: h.ObjectSelector}, fn)
}

// mutateFunc builds the entry's mutate function, filter included.
func (h *Hook) mutateFunc() (hooks.MutateFunc, error) {
	var fn hooks.MutateFunc
	switch {
	case h.Labels != nil && h.Strip == nil:
		fn = builtin.LabelsFunc(*h.Labels)
	case h.Strip != nil && h.Labels == nil:
		var err error
		if fn, err = builtin.StripFunc(*h.Strip); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("exactly one of labels or strip is required")
	}
	return builtin.Filtered(builtin.Filter{Namespaces: h.Namespaces, ObjectSelector: h.ObjectSelector}, fn)
}

// buildPolicy registers the policy hook of entry i: per resource, the entry's types that the
// policy's rules allow for it, each with the policy's function for that type, behind the
// entry's namespaces and objectSelector.
func (h *Hook) buildPolicy(reg *engine.Registry, i int) error {
	names := h.hookNames(i)
	for j, r := range h.Resources {
		gvk, err := r.GroupVersionKind()
		if err != nil {
			return err
		}
		allowed := h.compiled.HookTypes(gvk)
		funcs := map[hooks.HookType]hooks.MutateFunc{}
		for _, t := range h.Types {
			if !slices.Contains(allowed, t) {
				continue
			}
			fn, err := h.compiled.MutateFunc(t)
			if err != nil {
				return err
			}
			if fn, err = builtin.Filtered(builtin.Filter{Namespaces: h.Namespaces, ObjectSelector: h.ObjectSelector}, fn); err != nil {
				return err
			}
			funcs[t] = fn
		}
		if len(funcs) == 0 {
			continue // validate reported a resource none of the types runs on
		}
		var hook hooks.ClientHook = hooks.NewFuncs(names[j], reg.NewObject(gvk), funcs)
		if h.Undo != nil && !*h.Undo {
			hook = noUndo{hook}
		}
		if err := reg.RegisterRevision(hook, h.revision()); err != nil {
			return err
		}
	}
	return nil
}

// revision returns what identifies the entry's behaviour for a sealed undo
// (engine.Registry.RegisterRevision): the SHA-256 of its JSON and, for a PolicyFile, of the
// file's content, so that changing either makes the reads of older undos apply only what an
// update can change back.
func (h *Hook) revision() string {
	sum := sha256.New()
	entry, _ := json.Marshal(h) // the entry as validated: always encodable
	sum.Write(entry)
	if h.policyData != nil {
		sum.Write(h.policyData)
	} else if h.policyPath != "" {
		if data, err := os.ReadFile(h.policyPath); err == nil {
			sum.Write(data)
		}
	}
	for _, data := range h.filesData {
		sum.Write(data)
	}
	return "config:" + hex.EncodeToString(sum.Sum(nil)[:8])
}

// noUndo is a config hook with undo: false (hooks.Undoer). It keeps the hook's fast path: the
// registry finds the MetadataFunc through MetadataFunc when the wrapped hook has one.
type noUndo struct{ hooks.ClientHook }

func (noUndo) Undo() bool { return false }

// MutateFuncs implements hooks.FuncHook for the wrapped hook.
func (h noUndo) MutateFuncs() map[hooks.HookType]hooks.MutateFunc {
	return h.ClientHook.(hooks.FuncHook).MutateFuncs()
}

// MetadataFunc implements hooks.MetadataHook: the wrapped hook's, or nil when it has none
// (then the registry runs it typed).
func (h noUndo) MetadataFunc() hooks.MetadataFunc {
	if mh, ok := h.ClientHook.(hooks.MetadataHook); ok {
		return mh.MetadataFunc()
	}
	return nil
}
