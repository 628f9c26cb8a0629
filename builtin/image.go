package builtin

import (
	"context"
	_ "crypto/sha256" // digests: go-digest knows only the algorithms linked in
	_ "crypto/sha512"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/hooks"
)

// Image are the settings of the image hook: registry and repository prefix rewrites of the
// container images of Pods and of the pod templates of other kinds.
type Image struct {
	// Rules rewrite an image whose repository starts with From to start with To instead
	// ("docker.io" → "registry.internal/dockerhub": nginx:1.27 becomes
	// registry.internal/dockerhub/library/nginx:1.27). At least one.
	Rules []ImageRule `json:"rules"`
}

// ImageRule is one prefix rewrite. Both sides are read as image names are
// (github.com/distribution/reference, what containerd and Kubernetes use): a first component
// without "." or ":" that is not "localhost" is a Docker Hub path ("myorg" is
// docker.io/myorg), and a prefix ends at a "/" (ghcr.io/org matches ghcr.io/org/app, not
// ghcr.io/organization/app).
type ImageRule struct {
	// From is the registry, optionally with a repository path, whose images are rewritten:
	// "docker.io", "ghcr.io/org", "localhost:5000".
	From string `json:"from"`
	// To is what replaces From: "registry.internal/dockerhub", "mirror.example/org".
	To string `json:"to"`
}

// ErrImageRule is wrapped by every error about an image rule.
var ErrImageRule = errors.New("invalid image rule")

// imageRules are checked rules: each From and To as normalized repository prefixes.
type imageRules []imageRule

type imageRule struct {
	from, to   string // as written
	nFrom, nTo string // normalized
	index      int    // in Image.Rules
}

// normalizedPrefix returns p, a registry with an optional repository path, as the start of a
// normalized image name (docker.io added where an image name gets it), or an error naming
// what is wrong with it.
func normalizedPrefix(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty")
	}
	if strings.HasSuffix(p, "/") || strings.ContainsAny(p, "@") {
		return "", errors.New(`a registry and repository path without a trailing "/", tag or digest`)
	}
	// two more components: a one-component Docker Hub path would get "library/" otherwise
	n, err := reference.ParseNormalizedNamed(p + "/x/y")
	if err != nil {
		return "", fmt.Errorf("not the start of an image name: %w", err)
	}
	name, ok := strings.CutSuffix(n.Name(), "/x/y")
	if !ok {
		return "", errors.New("not the start of an image name")
	}
	return name, nil
}

// CheckImage returns the errors of s's rules, each naming the rule: a From or To that is not
// the start of an image name, two rules with one From, and a rule set that would rewrite its
// own output (a To that starts with some rule's From, or a From that starts with a To:
// ghcr.io → ghcr.io/mirror). Errors wrap ErrImageRule.
func CheckImage(s Image) error {
	_, err := checkImage(s)
	return err
}

func checkImage(s Image) (imageRules, error) {
	var errs []error
	if len(s.Rules) == 0 {
		return nil, fmt.Errorf("%w: at least one rule (from, to)", ErrImageRule)
	}
	rules := make(imageRules, 0, len(s.Rules))
	for i, r := range s.Rules {
		nFrom, err := normalizedPrefix(r.From)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: rules[%d].from %q: %w", ErrImageRule, i, r.From, err))
			continue
		}
		nTo, err := normalizedPrefix(r.To)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: rules[%d].to %q: %w", ErrImageRule, i, r.To, err))
			continue
		}
		rules = append(rules, imageRule{from: r.From, to: r.To, nFrom: nFrom, nTo: nTo, index: i})
	}
	for _, a := range rules {
		for _, b := range rules {
			switch {
			case a.index < b.index && a.nFrom == b.nFrom:
				errs = append(errs, fmt.Errorf("%w: rules[%d].from %q is rules[%d].from %q again", ErrImageRule, b.index, b.from, a.index, a.from))
			case underPrefix(a.nTo, b.nFrom) || underPrefix(b.nFrom, a.nTo):
				errs = append(errs, fmt.Errorf("%w: rules[%d].to %q and rules[%d].from %q overlap (%s, %s): a rewritten image would be rewritten again",
					ErrImageRule, a.index, a.to, b.index, b.from, a.nTo, b.nFrom))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

// underPrefix reports whether the normalized name n is prefix or starts with prefix + "/".
func underPrefix(n, prefix string) bool {
	rest, ok := strings.CutPrefix(n, prefix)
	return ok && (rest == "" || rest[0] == '/')
}

// rewrite returns image with the rule of the longest From that matches it applied (false: no
// rule matches, or image is not an image reference: unparsable reports that). Tag and digest
// are kept. reverse applies the rules backwards (To → From, normalized), for what the kubelet
// reports of a rewritten image.
func (rs imageRules) rewrite(image string, reverse bool) (out string, ok, unparsable bool) {
	n, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image, false, true
	}
	name := n.Name()
	match, replace := "", "" // of the rule with the longest match
	for _, r := range rs {
		from, to := r.nFrom, r.to
		if reverse {
			from, to = r.nTo, r.nFrom
		}
		if underPrefix(name, from) && len(from) > len(match) {
			match, replace = from, to
		}
	}
	if match == "" {
		return image, false, false
	}
	out = replace + name[len(match):]
	if t, ok := n.(reference.Tagged); ok {
		out += ":" + t.Tag()
	}
	if d, ok := n.(reference.Digested); ok {
		out += "@" + d.Digest().String()
	}
	if _, err := reference.ParseNormalizedNamed(out); err != nil {
		return image, false, true // a To that makes an invalid name for this image (too long)
	}
	return out, true, false
}

var unparsableImages = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "synchook_image_unparsable_total",
	Help: "Container images the image hook left alone because they are not image references, by hook.",
}, []string{"hook"})

func init() { crmetrics.Registry.MustRegister(unparsableImages) }

// ImageFuncs returns the mutate functions of the image hook named name for types: on
// CreatePhysical and UpdatePhysical it rewrites the image of every container, init container
// and ephemeral container of every pod spec in the object (a Pod's, a Deployment's template,
// a CronJob's job template: any corev1.PodSpec reachable through its fields); on GetPhysical
// it maps the images the kubelet reports in a Pod's container statuses back (To → From,
// normalized: docker.io/library/nginx:1.27), so that the tenant sees what a cluster without
// the mirror would report. An image that no rule matches is left alone, and so is one that is
// not an image reference (counted in synchook_image_unparsable_total). Objects without a Go
// type (Unstructured) are left alone. Errors: those of CheckImage, and a type other than
// those three.
func ImageFuncs(name string, s Image, types []hooks.HookType) (map[hooks.HookType]hooks.MutateFunc, error) {
	rules, err := checkImage(s)
	if err != nil {
		return nil, err
	}
	count := unparsableImages.WithLabelValues(name)
	rewriteAll := func(images []*string, reverse bool) {
		for _, img := range images {
			out, ok, bad := rules.rewrite(*img, reverse)
			if bad {
				count.Inc()
			}
			if ok {
				*img = out
			}
		}
	}
	funcs := map[hooks.HookType]hooks.MutateFunc{}
	for _, t := range types {
		switch t {
		case hooks.CreatePhysical, hooks.UpdatePhysical:
			funcs[t] = func(_ context.Context, obj client.Object) (client.Object, error) {
				rewriteAll(specImages(obj), false)
				return obj, nil
			}
		case hooks.GetPhysical:
			funcs[t] = func(_ context.Context, obj client.Object) (client.Object, error) {
				if pod, ok := obj.(*corev1.Pod); ok {
					rewriteAll(statusImages(&pod.Status), true)
				}
				return obj, nil
			}
		default:
			return nil, fmt.Errorf("%w: the image hook runs on CreatePhysical, UpdatePhysical (rewrite) and GetPhysical (status back), not %s", ErrImageRule, t)
		}
	}
	return funcs, nil
}

// specImages returns pointers to the image of every container of every pod spec in obj.
func specImages(obj client.Object) []*string {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	var out []*string
	for _, path := range podSpecPaths(v.Elem().Type()) {
		spec, ok := fieldAt(v.Elem(), path)
		if !ok {
			continue
		}
		ps := spec.Addr().Interface().(*corev1.PodSpec)
		for i := range ps.Containers {
			out = append(out, &ps.Containers[i].Image)
		}
		for i := range ps.InitContainers {
			out = append(out, &ps.InitContainers[i].Image)
		}
		for i := range ps.EphemeralContainers {
			out = append(out, &ps.EphemeralContainers[i].Image)
		}
	}
	return out
}

// statusImages returns pointers to the image of every container status of a Pod.
func statusImages(s *corev1.PodStatus) []*string {
	var out []*string
	for _, list := range [][]corev1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			out = append(out, &list[i].Image)
		}
	}
	return out
}

// fieldAt returns the value at the field index path below v, through non-nil pointers.
func fieldAt(v reflect.Value, path []int) (reflect.Value, bool) {
	for _, i := range path {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, true
}

var (
	podSpecType = reflect.TypeFor[corev1.PodSpec]()
	specPaths   sync.Map // reflect.Type → [][]int
)

// podSpecPaths returns the field index paths of the corev1.PodSpec values reachable from the
// struct type t through struct fields and pointers to structs (not through lists or maps),
// worked out once per type.
func podSpecPaths(t reflect.Type) [][]int {
	if p, ok := specPaths.Load(t); ok {
		return p.([][]int)
	}
	var out [][]int
	var walk func(t reflect.Type, at []int, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, at []int, seen map[reflect.Type]bool) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == podSpecType {
			out = append(out, at)
			return
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				walk(f.Type, append(append([]int(nil), at...), i), seen)
			}
		}
	}
	walk(t, nil, map[reflect.Type]bool{})
	specPaths.Store(t, out)
	return out
}
