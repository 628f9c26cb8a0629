package config

import (
	"fmt"
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
)

// Validate checks c against client-go's scheme (all built-in Kubernetes kinds) and returns
// every problem found, each naming its position (e.g. `hooks[0].types[1]: unknown hook type
// "CreatPhysical" (valid: …)`), joined with errors.Join and wrapped with ErrInvalid; nil when
// c is valid. Build checks again against the registry's own scheme.
func (c *Config) Validate() error { return c.validate(clientgoscheme.Scheme) }

// maxNameLength bounds hook names, which end up in logs, metrics and capabilities.
const maxNameLength = 253

// nameRE is what a hook name may look like.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// validator checks a config against one scheme.
type validator struct {
	scheme *runtime.Scheme
	// versions maps each group the scheme knows to its versions.
	versions map[string][]string
	// names maps each hook name registered so far to the position that registers it.
	names map[string]string
	errs  []error
}

func (c *Config) validate(scheme *runtime.Scheme) error {
	v := &validator{scheme: scheme, versions: map[string][]string{}, names: map[string]string{}}
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
	return invalid(v.errs)
}

// fail records an error at path.
func (v *validator) fail(path *field.Path, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

func (v *validator) hook(i int, h *Hook) {
	p := field.NewPath("hooks").Index(i)
	if h.Name != "" && (len(h.Name) > maxNameLength || !nameRE.MatchString(h.Name)) {
		v.fail(p.Child("name"), "invalid name %q: use at most %d letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
			h.Name, maxNameLength)
	}
	dupResource := v.resources(p.Child("resources"), h.Resources)
	v.claimNames(p, i, h, dupResource)
	v.types(p.Child("types"), h.Types)
	v.filter(p, h)
	switch {
	case h.Labels == nil && h.Strip == nil:
		v.fail(p, "one of labels or strip is required")
	case h.Labels != nil && h.Strip != nil:
		v.fail(p, "labels and strip cannot both be set; use one entry for each")
	case h.Labels != nil:
		v.labels(p.Child("labels"), h.Labels)
	default:
		v.strip(p.Child("strip", "paths"), h.Strip)
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
		where := p
		if len(names) > 1 {
			where = p.Child("resources").Index(j)
		}
		if other, taken := v.names[name]; taken {
			if len(names) > 1 {
				v.fail(where, "hook name %q is already used by %s", name, other)
			} else {
				v.fail(p.Child("name"), "duplicate hook name %q (already used by %s)", name, other)
			}
			continue
		}
		v.names[name] = where.String()
	}
}

// resources checks the resource list and reports which entries repeat an earlier one.
func (v *validator) resources(p *field.Path, rs []Resource) []bool {
	if len(rs) == 0 {
		v.fail(p, "at least one resource (apiVersion and kind) is required")
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
			v.fail(p.Index(j), "duplicate resource %s (also %s)", r, p.Index(first))
			continue
		}
		seen[gvk] = j
	}
	return dup
}

// resource checks one resource and returns its GVK when it is valid.
func (v *validator) resource(p *field.Path, r Resource) (schema.GroupVersionKind, bool) {
	ok := true
	var gv schema.GroupVersion
	switch parsed, err := schema.ParseGroupVersion(r.APIVersion); {
	case r.APIVersion == "":
		v.fail(p.Child("apiVersion"), "required (e.g. v1, apps/v1, example.com/v1alpha1)")
		ok = false
	case err != nil:
		v.fail(p.Child("apiVersion"), "invalid apiVersion %q: %v", r.APIVersion, err)
		ok = false
	case parsed.Version == "":
		v.fail(p.Child("apiVersion"), "invalid apiVersion %q: no version", r.APIVersion)
		ok = false
	default:
		gv = parsed
		if gv.Group != "" {
			for _, msg := range validation.IsDNS1123Subdomain(gv.Group) {
				v.fail(p.Child("apiVersion"), "invalid group %q in apiVersion %q: %s", gv.Group, r.APIVersion, msg)
				ok = false
			}
		}
		for _, msg := range validation.IsDNS1035Label(gv.Version) {
			v.fail(p.Child("apiVersion"), "invalid version %q in apiVersion %q: %s", gv.Version, r.APIVersion, msg)
			ok = false
		}
	}
	if r.Kind == "" {
		v.fail(p.Child("kind"), "required (e.g. Pod)")
		ok = false
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(r.Kind)); len(msgs) > 0 {
		v.fail(p.Child("kind"), "invalid kind %q: %s", r.Kind, strings.Join(msgs, "; "))
		ok = false
	}
	if !ok {
		return schema.GroupVersionKind{}, false
	}
	gvk := gv.WithKind(r.Kind)
	versions, groupKnown := v.versions[gv.Group]
	if !groupKnown {
		return gvk, true // a custom resource: handled as unstructured
	}
	if !slices.Contains(versions, gv.Version) {
		v.fail(p.Child("apiVersion"), "unknown version %q of %s (known: %s)", gv.Version, groupName(gv.Group), strings.Join(versions, ", "))
		return gvk, false
	}
	kinds := v.scheme.KnownTypes(gv)
	t, known := kinds[r.Kind]
	if !known {
		msg := fmt.Sprintf("unknown kind %q in %s", r.Kind, gv)
		if s := suggest(r.Kind, objectKinds(kinds)); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		v.fail(p.Child("kind"), "%s", msg)
		return gvk, false
	}
	if !isObject(t) {
		v.fail(p.Child("kind"), "%s %s is not an object kind (hooks handle objects with metadata; for a list, configure its item kind)", gv, r.Kind)
		return gvk, false
	}
	return gvk, true
}

// groupName names a group for messages; the core group is "".
func groupName(g string) string {
	if g == "" {
		return "the core group"
	}
	return fmt.Sprintf("group %q", g)
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
		v.fail(p, "at least one hook type is required (valid: %s)", hooks.ValidHookTypes())
		return
	}
	for j, t := range ts {
		if _, err := hooks.ParseHookType(string(t)); err != nil {
			v.errs = append(v.errs, fmt.Errorf("%s: %w", p.Index(j), err))
			continue
		}
		if first := slices.Index(ts, t); first < j {
			v.fail(p.Index(j), "duplicate hook type %q (also %s)", t, p.Index(first))
		}
	}
}

// filter checks namespaces and objectSelector, and that they build a builtin.Filter.
func (v *validator) filter(p *field.Path, h *Hook) {
	if h.Namespaces != nil && len(h.Namespaces) == 0 {
		v.fail(p.Child("namespaces"), "empty list matches no object; leave namespaces out to match all namespaces")
	}
	for j, ns := range h.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			v.fail(p.Child("namespaces").Index(j), "invalid namespace %q: %s", ns, strings.Join(msgs, "; "))
			continue
		}
		if first := slices.Index(h.Namespaces, ns); first < j {
			v.fail(p.Child("namespaces").Index(j), "duplicate namespace %q (also %s)", ns, p.Child("namespaces").Index(first))
		}
	}
	if h.ObjectSelector == nil {
		return
	}
	sp := p.Child("objectSelector")
	if errs := metav1validation.ValidateLabelSelector(h.ObjectSelector, metav1validation.LabelSelectorValidationOptions{}, sp); len(errs) > 0 {
		for _, e := range errs {
			v.errs = append(v.errs, e)
		}
		return
	}
	if _, err := metav1.LabelSelectorAsSelector(h.ObjectSelector); err != nil {
		v.fail(sp, "%v", err)
	}
}

// labels checks the labels block: something to set, valid keys and values.
func (v *validator) labels(p *field.Path, l *builtin.Labels) {
	if len(l.Labels) == 0 && len(l.Annotations) == 0 {
		v.fail(p, "set labels, annotations or both")
		return
	}
	for _, k := range sortedKeys(l.Labels) {
		kp := p.Child("labels").Key(k)
		for _, msg := range validation.IsQualifiedName(k) {
			v.fail(kp, "invalid label key %q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(l.Labels[k]) {
			v.fail(kp, "invalid label value %q: %s", l.Labels[k], msg)
		}
	}
	for _, k := range sortedKeys(l.Annotations) {
		// Annotation keys are qualified names in any case, as the API server checks them.
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			v.fail(p.Child("annotations").Key(k), "invalid annotation key %q: %s", k, msg)
		}
	}
	if err := apivalidation.ValidateAnnotationsSize(l.Annotations); err != nil {
		v.fail(p.Child("annotations"), "%v", err)
	}
}

// strip checks the strip paths: at least one, each a JSON Pointer that may be stripped.
func (v *validator) strip(p *field.Path, s *builtin.Strip) {
	if len(s.Paths) == 0 {
		v.fail(p, "at least one JSON Pointer is required (e.g. /status/hostIP)")
		return
	}
	for j, path := range s.Paths {
		if err := builtin.CheckStripPath(path); err != nil {
			v.errs = append(v.errs, fmt.Errorf("%s: %w", p.Index(j), err))
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
