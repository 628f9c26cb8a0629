package builtin

import (
	"context"
	_ "crypto/sha256" // digests: go-digest knows only the algorithms linked in
	_ "crypto/sha512"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
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

// dockerHubHosts are the host names under which container runtimes pull from Docker Hub: the
// name images get by default ("docker.io"), its legacy index name (distribution/reference folds
// only the lowercase spelling), the registry endpoint containerd and Docker resolve docker.io
// to, and the historic registry.hub.docker.com, which serves Docker Hub's repositories too. An
// image under any of them, on any spelling of port 443, is a Docker Hub image to the rules.
var dockerHubHosts = []string{"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}

// endpoint returns the registry domain of an image reference (distribution/reference's
// Domain: a host, an IPv4 address or a bracketed IPv6 address, then an optional ":port") as the
// endpoint a runtime dials: the host in lowercase (host names are case-insensitive), an IPv6
// address in its canonical form (net/netip: "[FD00:0::1]" is "[fd00::1]"), the port as a
// number ("05000" is 5000, Go's dialer and containerd read it so) and none where it is 443, the
// HTTPS default; Docker Hub's names (dockerHubHosts) are "docker.io". A port past 65535 is kept
// as written: no runtime dials it.
func endpoint(domain string) string {
	host, port := domain, ""
	if rest, ok := strings.CutPrefix(domain, "["); ok {
		if addr, after, ok := strings.Cut(rest, "]"); ok {
			if a, err := netip.ParseAddr(addr); err == nil {
				addr = a.String()
			}
			host, port = "["+addr+"]", strings.TrimPrefix(after, ":")
		}
	} else if h, p, ok := strings.Cut(domain, ":"); ok {
		host, port = h, p
	}
	host = strings.ToLower(host)
	if n, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(n, 10)
		if n == 443 {
			port = ""
		}
	}
	if port == "" && slices.Contains(dockerHubHosts, host) {
		return "docker.io"
	}
	if port == "" {
		return host
	}
	return host + ":" + port
}

// resolvedName returns the name of n as the registry it is pulled from sees it: its endpoint
// (the domain as a runtime dials it) then "/" and the repository path as written.
// GHCR.IO/org/app, ghcr.io:0443/org/app and ghcr.io/org/app are one repository; so are
// registry-1.docker.io/library/nginx and nginx.
func resolvedName(n reference.Named) string {
	return endpoint(reference.Domain(n)) + "/" + reference.Path(n)
}

// normalizedPrefix returns p, a registry with an optional repository path, as the start of a
// resolved image name (resolvedName: docker.io added where an image name gets it, the host in
// lowercase, the port as a number and none for 443), or an error naming what is wrong with it.
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
	name, ok := strings.CutSuffix(resolvedName(n), "/x/y")
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

// errNotReference: an image that is not an image reference (the kubelet refuses it too, as
// InvalidImageName): left alone and counted.
var errNotReference = errors.New("not an image reference")

// ErrImageRewrite is wrapped by the error of a rewrite whose result would not be an image
// reference (a name past distribution/reference's 255 characters once To is put in): the
// request fails and the hook's failure policy decides, the image is never passed through.
var ErrImageRewrite = errors.New("image rewrite refused")

// rewrite returns image with the rule of the longest From that matches its resolved name
// (resolvedName) applied; ok is false where no rule matches. Tag and digest are kept. reverse
// applies the rules backwards (To → From, normalized), for what the kubelet reports of a
// rewritten image. Errors: errNotReference where image is not an image reference, and an
// ErrImageRewrite naming the image and the rule where the result would not be one.
func (rs imageRules) rewrite(image string, reverse bool) (out string, ok bool, err error) {
	n, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image, false, errNotReference
	}
	name := resolvedName(n)
	var rule *imageRule // the one with the longest match
	match, replace := "", ""
	for i, r := range rs {
		from, to := r.nFrom, r.to
		if reverse {
			from, to = r.nTo, r.nFrom
		}
		if underPrefix(name, from) && len(from) > len(match) {
			rule, match, replace = &rs[i], from, to
		}
	}
	if rule == nil {
		return image, false, nil
	}
	out = replace + name[len(match):]
	if t, ok := n.(reference.Tagged); ok {
		out += ":" + t.Tag()
	}
	if d, ok := n.(reference.Digested); ok {
		out += "@" + d.Digest().String()
	}
	if _, err := reference.ParseNormalizedNamed(out); err != nil {
		return image, false, fmt.Errorf("%w: image %q under rules[%d] (from %q, to %q) would be %q: %w",
			ErrImageRewrite, image, rule.index, rule.from, rule.to, out, err)
	}
	return out, true, nil
}

// rewriteImageID maps an image ID the kubelet reports (status.containerStatuses[].imageID, an
// image volume's imageRef: "registry.internal/dockerhub/library/nginx@sha256:…", with Docker's
// "docker-pullable://" or another "scheme://" in front) back as rewrite does with reverse, the
// digest kept; an ID without a repository ("sha256:…") or that no rule matches is kept.
func (rs imageRules) rewriteImageID(id string) string {
	scheme, ref, ok := strings.Cut(id, "://")
	if !ok {
		scheme, ref = "", id
	} else {
		scheme += "://"
	}
	out, ok, err := rs.rewrite(ref, true)
	if err != nil || !ok {
		return id
	}
	return scheme + out
}

var unparsableImages = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "synchook_image_unparsable_total",
	Help: "Container images the image hook left alone because they are not image references, by hook.",
}, []string{"hook"})

func init() { crmetrics.Registry.MustRegister(unparsableImages) }

// ImageFuncs returns the mutate functions of the image hook named name for types: on
// CreatePhysical and UpdatePhysical it rewrites every image the kubelet pulls for every pod spec
// in the object (a Pod's, a Deployment's template, a CronJob's job template: any corev1.PodSpec
// reachable through its fields): the image of every container, init container and ephemeral
// container and the reference of every image volume. On GetPhysical it maps what the kubelet
// reports of a Pod back (To → From, normalized): the image and the imageID (its digest kept)
// of every container status and the imageRef of every image volume's mount status, so that the
// tenant sees what a cluster without the mirror would report (docker.io/library/nginx:1.27).
// An image that no rule matches is left alone, and so is one that is not an image reference
// (counted in synchook_image_unparsable_total); a rewrite that would make an invalid reference
// fails the call with an ErrImageRewrite naming the image and the rule. Objects without a Go
// type (Unstructured) are left alone. Errors at construction: those of CheckImage, and a type
// other than those three.
func ImageFuncs(name string, s Image, types []hooks.HookType) (map[hooks.HookType]hooks.MutateFunc, error) {
	rules, err := checkImage(s)
	if err != nil {
		return nil, err
	}
	count := unparsableImages.WithLabelValues(name)
	rewriteAll := func(images []*string, reverse bool) error {
		for _, img := range images {
			out, ok, err := rules.rewrite(*img, reverse)
			switch {
			case errors.Is(err, errNotReference):
				count.Inc()
			case err != nil && !reverse:
				return err
			case ok:
				*img = out
			}
		}
		return nil
	}
	funcs := map[hooks.HookType]hooks.MutateFunc{}
	for _, t := range types {
		switch t {
		case hooks.CreatePhysical, hooks.UpdatePhysical:
			funcs[t] = func(_ context.Context, obj client.Object) (client.Object, error) {
				if err := rewriteAll(specImages(obj), false); err != nil {
					return nil, err
				}
				return obj, nil
			}
		case hooks.GetPhysical:
			funcs[t] = func(_ context.Context, obj client.Object) (client.Object, error) {
				if pod, ok := obj.(*corev1.Pod); ok {
					images, ids := statusImages(&pod.Status)
					_ = rewriteAll(images, true) // backwards: a result that is no reference is left alone
					for _, id := range ids {
						*id = rules.rewriteImageID(*id)
					}
				}
				return obj, nil
			}
		default:
			return nil, fmt.Errorf("%w: the image hook runs on CreatePhysical, UpdatePhysical (rewrite) and GetPhysical (status back), not %s", ErrImageRule, t)
		}
	}
	return funcs, nil
}

// specImages returns pointers to every image the kubelet pulls for the pod specs in obj: the
// image of every container, init container and ephemeral container and the reference of every
// image volume (spec.volumes[].image.reference).
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
		for i := range ps.Volumes {
			if img := ps.Volumes[i].Image; img != nil {
				out = append(out, &img.Reference)
			}
		}
	}
	return out
}

// statusImages returns pointers to what the kubelet reports of the images of a Pod: the image
// of every container status, and the image IDs (every container status's imageID, every image
// volume mount's imageRef).
func statusImages(s *corev1.PodStatus) (images, ids []*string) {
	for _, list := range [][]corev1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			images = append(images, &list[i].Image)
			ids = append(ids, &list[i].ImageID)
			for j := range list[i].VolumeMounts {
				if vs := list[i].VolumeMounts[j].VolumeStatus; vs != nil && vs.Image != nil {
					ids = append(ids, &vs.Image.ImageRef)
				}
			}
		}
	}
	return images, ids
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
