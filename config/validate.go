package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/policyreg"
)

// Validate checks c against client-go's scheme (all built-in Kubernetes kinds) and returns
// every problem found, nil when c is valid. The problems are a field.ErrorList, each naming its
// place (`hooks[0].labels.labels[team a]: Invalid value: "team a": name part must …`); the
// error's text is ErrInvalid's followed by the list's ToAggregate, and errors.Is finds
// ErrInvalid. Build checks again against the registry's own scheme.
func (c *Config) Validate() error { return c.validate(clientgoscheme.Scheme) }

// maxNameLength bounds hook names, which end up in logs, metrics and capabilities.
const maxNameLength = 253

// nameRE is what a hook name may look like.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// validator checks a config against one scheme.
type validator struct {
	scheme *runtime.Scheme
	// source is where the config came from: where its relative files are.
	source Source
	// readFile reads the files the config names (Reader.ReadFile); nil: the policy compiler
	// reads them.
	readFile func(string) ([]byte, error)
	// hostParams is the program's params from the host cluster (BuildOptions); nil: none.
	hostParams policyreg.HostParams
	// extraParams are the params every policy entry gets after its own (Config.AddParams);
	// extraBindings the bindings the entry of the policy each names gets (Config.AddBindings),
	// usedBindings which of them an entry took.
	extraParams, extraBindings []extraObject
	usedBindings               []bool
	// versions maps each group the scheme knows to its versions.
	versions map[string][]string
	// names maps each hook name registered so far to the position that registers it.
	names map[string]string
	errs  field.ErrorList
	// causes are the errors of other packages behind some of errs, for errors.Is.
	causes []error
}

func (c *Config) validate(scheme *runtime.Scheme) error {
	v := &validator{scheme: scheme, source: c.source, readFile: c.readFile, hostParams: c.hostParams, extraParams: c.extraParams, extraBindings: c.extraBindings, usedBindings: make([]bool, len(c.extraBindings)), versions: map[string][]string{}, names: map[string]string{}}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if !slices.Contains(v.versions[gvk.Group], gvk.Version) {
			v.versions[gvk.Group] = append(v.versions[gvk.Group], gvk.Version)
		}
	}
	for _, vs := range v.versions {
		slices.Sort(vs)
	}
	for i := range c.Hooks {
		v.hook(i, &c.Hooks[i])
	}
	v.unusedBindings()
	v.undoPerChain(c.Hooks)
	return invalid(v.errs.ToAggregate(), v.causes...)
}

// undoReason is why hooks of one chain must agree on undo.
const undoReason = "undo is per chain: a hook's change would be left on the read by another hook's undo: false; set the same undo on both or split them"

// undoPerChain refuses entries that share a chain with an earlier entry and disagree with it
// on undo (unset is true). Undo is per chain, not per hook: the engine records a write chain's
// undo only when no hook of it has undo false (engine.Registry), so an undo: false on one hook
// would leave another hook's change on the read, with nothing to say so. A chain is a GVK and
// a write hook type that has a read to undo it (CreatePhysical, UpdatePhysical, CreateVirtual,
// UpdateVirtual); undo means nothing on the other types, where hooks may differ. An entry with
// several resources or types is in one chain per (resource, type) pair that it registers. One
// error per pair of entries, naming the chains they share.
func (v *validator) undoPerChain(hs []Hook) {
	type chainKey struct {
		gvk schema.GroupVersionKind
		t   hooks.HookType
	}
	first := map[chainKey]int{} // the first entry of each chain
	type pair struct{ a, b int }
	var pairs []pair
	shared := map[pair][]string{} // the chains each disagreeing pair shares
	for i := range hs {
		h := &hs[i]
		for _, r := range h.Resources {
			gvk, err := r.GroupVersionKind()
			if err != nil {
				continue // reported
			}
			for _, t := range h.Types {
				if _, ok := t.ReadOf(); !ok || !t.Valid() {
					continue
				}
				if h.compiled != nil && !slices.Contains(h.compiled.HookTypes(gvk), t) {
					continue // the policy does not run there (buildPolicy)
				}
				k := chainKey{gvk, t}
				j, seen := first[k]
				if !seen {
					first[k] = i
					continue
				}
				if hs[j].undo() == h.undo() {
					continue
				}
				p := pair{j, i}
				if _, ok := shared[p]; !ok {
					pairs = append(pairs, p)
				}
				if name := r.String() + " " + string(t); !slices.Contains(shared[p], name) {
					shared[p] = append(shared[p], name)
				}
			}
		}
	}
	for _, p := range pairs {
		a, b := &hs[p.a], &hs[p.b]
		path := field.NewPath("hooks").Index(p.b).Child("undo")
		v.errs = append(v.errs, field.Invalid(path, b.undo(), fmt.Sprintf(
			"hook %q (%s) has %s and hook %q (%s) has %s, in the chain of %s: %s",
			b.name(p.b), field.NewPath("hooks").Index(p.b), b.undoText(),
			a.name(p.a), field.NewPath("hooks").Index(p.a), a.undoText(),
			strings.Join(shared[p], ", "), undoReason)))
	}
}

// add records errs, sorted: apimachinery's validators of maps range over them.
func (v *validator) add(errs field.ErrorList) {
	slices.SortStableFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Error(), b.Error()) })
	v.errs = append(v.errs, errs...)
}

// fail records err, an error of another package about the value at path, as the field error
// `<path>: Invalid value: <err>` (err quotes the value).
func (v *validator) fail(path *field.Path, err error) {
	v.errs = append(v.errs, field.Invalid(path, field.OmitValueType{}, err.Error()))
	v.causes = append(v.causes, err)
}

// duplicate records that the value at path repeats an earlier one, which detail names.
func (v *validator) duplicate(path *field.Path, value any, detail string) {
	e := field.Duplicate(path, value)
	e.Detail = detail
	v.errs = append(v.errs, e)
}

func (v *validator) hook(i int, h *Hook) {
	p := field.NewPath("hooks").Index(i)
	if h.Name != "" && (len(h.Name) > maxNameLength || !nameRE.MatchString(h.Name)) {
		v.errs = append(v.errs, field.Invalid(p.Child("name"), h.Name, fmt.Sprintf(
			"use at most %d letters, digits, '-', '_' and '.', starting and ending with a letter or digit", maxNameLength)))
	}
	isPolicy := h.Policy != nil || h.PolicyFile != ""
	if isPolicy {
		v.policy(p, h)
	}
	if !isPolicy && (h.Bindings != nil || h.Params != nil || h.BindingsFile != "" || h.ParamsFile != "") {
		v.errs = append(v.errs, field.Forbidden(p, "bindings, params, bindingsFile and paramsFile are only for a policy or policyFile entry"))
	}
	if h.HostParams != nil {
		v.hostParamsOf(p.Child("hostParams"), h.HostParams, isPolicy)
	}
	if isPolicy && h.compiled == nil && len(h.Resources) == 0 {
		return // the policy is reported; its resources are unknown
	}
	dupResource := v.resources(p.Child("resources"), h.Resources)
	v.claimNames(p, i, h, dupResource)
	v.types(p.Child("types"), h.Types)
	v.filter(p, h)
	set := 0
	for _, b := range []bool{h.Labels != nil, h.Strip != nil, h.Image != nil, h.Policy != nil, h.PolicyFile != ""} {
		if b {
			set++
		}
	}
	switch {
	case set == 0:
		v.errs = append(v.errs, field.Required(p, "one of labels, strip, image, policy or policyFile"))
	case set > 1:
		v.errs = append(v.errs, field.Forbidden(p, "only one of labels, strip, image, policy and policyFile can be set; use one entry for each"))
	case isPolicy:
	case h.Labels != nil:
		v.labels(p.Child("labels"), h.Labels)
	case h.Image != nil:
		v.image(p, h)
	default:
		v.strip(p.Child("strip", "paths"), h.Strip, h.Resources)
	}
}

// claimNames checks that the names entry i registers are not taken, and takes them. Resources
// marked in skip (duplicates, already reported) are left out.
func (v *validator) claimNames(p *field.Path, i int, h *Hook, skip []bool) {
	names := h.hookNames(i)
	for j, name := range names {
		if j < len(skip) && skip[j] {
			continue
		}
		owner, where := p, p.Child("name")
		if len(names) > 1 {
			owner = p.Child("resources").Index(j)
			where = owner
		}
		if other, taken := v.names[name]; taken {
			v.duplicate(where, name, "hook name already used by "+other)
			continue
		}
		v.names[name] = owner.String()
	}
}

// resources checks the resource list and reports which entries repeat an earlier one.
func (v *validator) resources(p *field.Path, rs []Resource) []bool {
	if len(rs) == 0 {
		v.errs = append(v.errs, field.Required(p, "at least one resource (apiVersion and kind)"))
		return nil
	}
	dup := make([]bool, len(rs))
	seen := map[schema.GroupVersionKind]int{}
	for j, r := range rs {
		gvk, ok := v.resource(p.Index(j), r)
		if !ok {
			continue
		}
		if first, ok := seen[gvk]; ok {
			dup[j] = true
			v.duplicate(p.Index(j), r.String(), "also "+p.Index(first).String())
			continue
		}
		seen[gvk] = j
	}
	return dup
}

// resource checks one resource and returns its GVK when it is valid.
func (v *validator) resource(p *field.Path, r Resource) (schema.GroupVersionKind, bool) {
	n := len(v.errs)
	av, kp := p.Child("apiVersion"), p.Child("kind")
	var gv schema.GroupVersion
	switch parsed, err := schema.ParseGroupVersion(r.APIVersion); {
	case r.APIVersion == "":
		v.errs = append(v.errs, field.Required(av, "e.g. v1, apps/v1, example.com/v1alpha1"))
	case err != nil:
		v.errs = append(v.errs, field.Invalid(av, r.APIVersion, err.Error()))
	case parsed.Version == "":
		v.errs = append(v.errs, field.Invalid(av, r.APIVersion, "no version"))
	default:
		gv = parsed
		if gv.Group != "" {
			for _, msg := range validation.IsDNS1123Subdomain(gv.Group) {
				v.errs = append(v.errs, field.Invalid(av, r.APIVersion, fmt.Sprintf("group %q: %s", gv.Group, msg)))
			}
		}
		for _, msg := range validation.IsDNS1035Label(gv.Version) {
			v.errs = append(v.errs, field.Invalid(av, r.APIVersion, fmt.Sprintf("version %q: %s", gv.Version, msg)))
		}
	}
	if r.Kind == "" {
		v.errs = append(v.errs, field.Required(kp, "e.g. Pod"))
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(r.Kind)); len(msgs) > 0 {
		v.errs = append(v.errs, field.Invalid(kp, r.Kind, strings.Join(msgs, "; ")))
	}
	if len(v.errs) > n {
		return schema.GroupVersionKind{}, false
	}
	gvk := gv.WithKind(r.Kind)
	versions, groupKnown := v.versions[gv.Group]
	if !groupKnown {
		return gvk, true // a custom resource: handled as unstructured
	}
	if !slices.Contains(versions, gv.Version) {
		known := make([]string, len(versions))
		for k, ver := range versions {
			known[k] = schema.GroupVersion{Group: gv.Group, Version: ver}.String()
		}
		v.errs = append(v.errs, field.NotSupported(av, r.APIVersion, known))
		return gvk, false
	}
	kinds := v.scheme.KnownTypes(gv)
	t, known := kinds[r.Kind]
	if !known {
		msg := "unknown kind in " + gv.String()
		if s := suggest(r.Kind, objectKinds(kinds)); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		v.errs = append(v.errs, field.Invalid(kp, r.Kind, msg))
		return gvk, false
	}
	if !isObject(t) {
		v.errs = append(v.errs, field.Invalid(kp, r.Kind, fmt.Sprintf(
			"%s %s is not an object kind (hooks handle objects with metadata; for a list, configure its item kind)", gv, r.Kind)))
		return gvk, false
	}
	return gvk, true
}

var clientObjectType = reflect.TypeFor[client.Object]()

// isObject reports whether the scheme type t (a struct type) is a client.Object.
func isObject(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(clientObjectType)
}

// objectKinds returns the kinds in kinds that are client.Objects, sorted.
func objectKinds(kinds map[string]reflect.Type) []string {
	var out []string
	for k, t := range kinds {
		if isObject(t) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// suggest returns the candidate closest to s when it is close enough to be a typo: equal but
// for case, or at most two edits (a swap of neighbours counts as one) away.
func suggest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if strings.EqualFold(c, s) {
			return c
		}
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b: insertions,
// deletions, substitutions and swaps of adjacent bytes each cost 1.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// types checks the hook types: at least one, each one of the eight, none twice.
func (v *validator) types(p *field.Path, ts []hooks.HookType) {
	if len(ts) == 0 {
		v.errs = append(v.errs, field.Required(p, "at least one of "+hooks.ValidHookTypes()))
		return
	}
	for j, t := range ts {
		if _, err := hooks.ParseHookType(string(t)); err != nil {
			v.fail(p.Index(j), err)
			continue
		}
		if first := slices.Index(ts, t); first < j {
			v.duplicate(p.Index(j), string(t), "also "+p.Index(first).String())
		}
	}
}

// filter checks namespaces (validation.IsDNS1123Label) and objectSelector
// (metav1validation.ValidateLabelSelector), and that they build a builtin.Filter.
func (v *validator) filter(p *field.Path, h *Hook) {
	np := p.Child("namespaces")
	if h.Namespaces != nil && len(h.Namespaces) == 0 {
		v.errs = append(v.errs, field.Required(np, "an empty list matches no object; leave namespaces out to match all namespaces"))
	}
	for j, ns := range h.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			for _, msg := range msgs {
				v.errs = append(v.errs, field.Invalid(np.Index(j), ns, msg))
			}
			continue
		}
		if first := slices.Index(h.Namespaces, ns); first < j {
			v.duplicate(np.Index(j), ns, "also "+np.Index(first).String())
		}
	}
	if h.ObjectSelector == nil {
		return
	}
	sp := p.Child("objectSelector")
	if errs := metav1validation.ValidateLabelSelector(h.ObjectSelector, metav1validation.LabelSelectorValidationOptions{}, sp); len(errs) > 0 {
		v.add(errs)
		return
	}
	if _, err := metav1.LabelSelectorAsSelector(h.ObjectSelector); err != nil {
		v.fail(sp, err)
	}
}

// labels checks the labels block: something to set, labels as metav1validation.ValidateLabels
// and annotations as apivalidation.ValidateAnnotations (keys, total size) check them.
func (v *validator) labels(p *field.Path, l *builtin.Labels) {
	if len(l.Labels) == 0 && len(l.Annotations) == 0 && l.FromNamespace == nil {
		v.errs = append(v.errs, field.Required(p, "set labels, annotations, fromNamespace or more than one"))
		return
	}
	if l.FromNamespace != nil {
		if err := builtin.CheckFromNamespace(*l.FromNamespace); err != nil {
			v.fail(p.Child("fromNamespace"), err)
		}
	}
	// One label at a time, so that an error about a value names its key: labels.labels[team].
	for _, k := range slices.Sorted(maps.Keys(l.Labels)) {
		v.add(metav1validation.ValidateLabels(map[string]string{k: l.Labels[k]}, p.Child("labels").Key(k)))
	}
	v.add(apivalidation.ValidateAnnotations(l.Annotations, p.Child("annotations")))
}

// strip checks the strip paths: at least one, each a JSON Pointer that may be stripped and,
// on each resource whose kind the scheme knows, has no step that never matches along its Go
// type (builtin.CheckStripPathFor: "*" where an object is, a key where an array is).
func (v *validator) strip(p *field.Path, s *builtin.Strip, resources []Resource) {
	if len(s.Paths) == 0 {
		v.errs = append(v.errs, field.Required(p, "at least one JSON Pointer (e.g. /status/hostIP)"))
		return
	}
	var typed []runtime.Object
	for _, r := range resources {
		if obj, err := v.scheme.New(schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)); err == nil {
			typed = append(typed, obj)
		}
	}
	for j, path := range s.Paths {
		err := builtin.CheckStripPath(path)
		for _, obj := range typed {
			if err == nil {
				err = builtin.CheckStripPathFor(obj, path)
			}
		}
		if err != nil {
			v.fail(p.Index(j), err)
		}
	}
}

// image checks the image block (builtin.CheckImage, each error naming its rule) and that the
// entry's types are those the image hook runs on.
func (v *validator) image(p *field.Path, h *Hook) {
	if err := builtin.CheckImage(*h.Image); err != nil {
		v.fail(p.Child("image"), err)
	}
	for k, t := range h.Types {
		if t != hooks.CreatePhysical && t != hooks.UpdatePhysical && t != hooks.GetPhysical {
			v.errs = append(v.errs, field.NotSupported(p.Child("types").Index(k), string(t),
				[]string{string(hooks.CreatePhysical), string(hooks.UpdatePhysical), string(hooks.GetPhysical)}))
		}
	}
}

// notLinked is the error of a policy entry in a binary without policy hooks.
const notLinked = "policy hooks are not linked into this binary: import github.com/synchook/synchook/config/policy (the synchook binary has them)"

// policy parses and compiles the entry's policy (or policyFile) into h.compiled, with the
// compiler that config/policy registers (refusing the entry when none is), fills the entry's
// resources from the policy's rules when it lists none, and checks that every type runs on
// some resource.
func (v *validator) policy(p *field.Path, h *Hook) {
	where := p.Child("policy")
	src := policyreg.Source{Scheme: v.scheme}
	if h.PolicyFile != "" {
		where = p.Child("policyFile")
		file, err := v.source.resolve(h.PolicyFile)
		if err != nil {
			v.errs = append(v.errs, field.Invalid(where, field.OmitValueType{}, err.Error()))
			return
		}
		src.File, h.policyPath = file, file
		if v.readFile != nil {
			data, err := v.readFile(file)
			if err != nil {
				v.errs = append(v.errs, field.Invalid(where, field.OmitValueType{}, err.Error()))
				return
			}
			src.File, src.Manifest, h.policyData = "", data, data
		}
	} else if h.Policy != nil {
		src.Manifest = *h.Policy
	}
	for _, b := range h.Bindings {
		src.Bindings = append(src.Bindings, b)
	}
	for _, o := range h.Params {
		src.Params = append(src.Params, o)
	}
	if !v.policyFiles(p, h, &src) {
		return
	}
	if h.HostParams != nil {
		src.HostParams, src.ParamNamespaces = v.hostParams, h.HostParams.Namespaces
	}
	compile := policyreg.Lookup()
	if compile == nil {
		v.errs = append(v.errs, field.Forbidden(where, notLinked))
		return
	}
	for _, r := range h.Resources {
		if gvk, err := r.GroupVersionKind(); err == nil {
			src.Kinds = append(src.Kinds, gvk)
		}
	}
	compiled, err := compile(src)
	if err != nil {
		v.fail(where, err)
		return
	}
	h.compiled = compiled
	if len(h.Resources) == 0 {
		for _, gvk := range compiled.Resources() {
			apiVersion, kind := gvk.ToAPIVersionAndKind()
			h.Resources = append(h.Resources, Resource{APIVersion: apiVersion, Kind: kind})
		}
	}
	for j, t := range h.Types {
		runs := false
		for _, r := range h.Resources {
			if gvk, err := r.GroupVersionKind(); err == nil && slices.Contains(compiled.HookTypes(gvk), t) {
				runs = true
			}
		}
		if !runs && t.Valid() {
			v.errs = append(v.errs, field.Invalid(p.Child("types").Index(j), t, "the policy's resourceRules list no operation for this hook type on any of its resources (CREATE: Create*, UPDATE: Update*, DELETE: Delete*, any: Get*)"))
		}
	}
}

// hostParamsOf checks an entry's hostParams: only on a policy entry, with at least one
// namespace, each a namespace name, none twice.
func (v *validator) hostParamsOf(p *field.Path, hp *HostParams, isPolicy bool) {
	if !isPolicy {
		v.errs = append(v.errs, field.Forbidden(p, "hostParams is only for a policy or policyFile entry"))
		return
	}
	if len(hp.Namespaces) == 0 {
		v.errs = append(v.errs, field.Required(p.Child("namespaces"), "the host namespaces params may come from (synchook never reads params from other namespaces)"))
	}
	seen := map[string]bool{}
	for i, ns := range hp.Namespaces {
		path := p.Child("namespaces").Index(i)
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			v.errs = append(v.errs, field.Invalid(path, ns, strings.Join(msgs, "; ")))
			continue
		}
		if seen[ns] {
			v.errs = append(v.errs, field.Duplicate(path, ns))
		}
		seen[ns] = true
	}
}
