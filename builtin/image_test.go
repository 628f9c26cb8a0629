package builtin_test

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var mirrorRules = builtin.Image{Rules: []builtin.ImageRule{
	{From: "docker.io", To: "registry.internal/dockerhub"},
	{From: "ghcr.io/org", To: "mirror.example/org"},
	{From: "localhost:5000", To: "registry.internal/local"},
	{From: "quay.io/team/special", To: "registry.internal/special"},
	{From: "quay.io", To: "registry.internal/quay"},
}}

// rewritePod returns the image of a Pod's one container after the image hook's write.
func rewriteImage(t *testing.T, image string) string {
	t.Helper()
	funcs, err := builtin.ImageFuncs("mirror", mirrorRules, []hooks.HookType{hooks.CreatePhysical})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: image}}}}
	out, err := funcs[hooks.CreatePhysical](t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Pod).Spec.Containers[0].Image
}

// The references are those distribution/reference's own tests normalize (normalize_test.go,
// reference_test.go): short names, library/, ports, digests, tag and digest, uppercase.
func TestImageRewritesReferencesAsContainerdReadsThem(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                           "registry.internal/dockerhub/library/nginx",
		"nginx:1.27":                      "registry.internal/dockerhub/library/nginx:1.27",
		"library/nginx:1.27":              "registry.internal/dockerhub/library/nginx:1.27",
		"docker.io/library/nginx:1.27":    "registry.internal/dockerhub/library/nginx:1.27",
		"index.docker.io/library/busybox": "registry.internal/dockerhub/library/busybox", // the legacy Hub name
		// the registry as the runtime resolves it: host case, the HTTPS port, Hub's endpoint
		"GHCR.IO/org/app:2":                         "mirror.example/org/app:2",
		"Ghcr.Io/org/app@" + digest:                 "mirror.example/org/app@" + digest,
		"ghcr.io:443/org/app":                       "mirror.example/org/app",
		"GHCR.io:443/org/team/app:1":                "mirror.example/org/team/app:1",
		"ghcr.io:8443/org/app":                      "ghcr.io:8443/org/app", // another port: another registry
		"registry-1.docker.io/library/nginx:1.27":   "registry.internal/dockerhub/library/nginx:1.27",
		"REGISTRY-1.DOCKER.IO:443/library/nginx":    "registry.internal/dockerhub/library/nginx",
		"INDEX.DOCKER.IO/library/busybox":           "registry.internal/dockerhub/library/busybox",
		"Docker.io/myorg/app":                       "registry.internal/dockerhub/myorg/app",
		"docker.io:443/library/nginx":               "registry.internal/dockerhub/library/nginx",
		"registry-1.docker.io/nginx":                "registry.internal/dockerhub/nginx", // the path as the runtime asks for it
		"LOCALHOST:5000/app":                        "registry.internal/local/app",
		"QUAY.IO/team/special/app":                  "registry.internal/special/app",
		"myorg/app:v1":                              "registry.internal/dockerhub/myorg/app:v1",
		"nginx@" + digest:                           "registry.internal/dockerhub/library/nginx@" + digest,
		"nginx:1.27@" + digest:                      "registry.internal/dockerhub/library/nginx:1.27@" + digest,
		"ghcr.io/org/app:2":                         "mirror.example/org/app:2",
		"ghcr.io/org/team/app":                      "mirror.example/org/team/app",
		"ghcr.io/organization/app":                  "ghcr.io/organization/app", // a prefix ends at "/"
		"ghcr.io/other/app":                         "ghcr.io/other/app",        // no rule: left alone
		"localhost:5000/app:v1":                     "registry.internal/local/app:v1",
		"localhost/app":                             "localhost/app",                 // another registry: no port
		"quay.io/team/special/app":                  "registry.internal/special/app", // the longest from wins
		"quay.io/team/other":                        "registry.internal/quay/team/other",
		"registry.internal/dockerhub/library/nginx": "registry.internal/dockerhub/library/nginx",
		"Nginx":                      "Nginx", // uppercase: not a reference, left alone
		"nginx:":                     "nginx:",
		"":                           "",
		"ghcr.io/org/app@sha256:abc": "ghcr.io/org/app@sha256:abc", // a short digest: not a reference
	} {
		if got := rewriteImage(t, in); got != want {
			t.Errorf("image %q → %q, want %q", in, got, want)
		}
	}
}

func TestImageRewritesEveryContainerOfEveryPodSpec(t *testing.T) {
	funcs, err := builtin.ImageFuncs("mirror", mirrorRules, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical, hooks.GetPhysical})
	if err != nil {
		t.Fatal(err)
	}
	spec := func() corev1.PodSpec {
		return corev1.PodSpec{
			Containers:          []corev1.Container{{Name: "a", Image: "nginx:1.27"}, {Name: "b", Image: "ghcr.io/org/b"}},
			InitContainers:      []corev1.Container{{Name: "i", Image: "busybox"}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Image: "alpine"}}},
		}
	}
	check := func(t *testing.T, ps corev1.PodSpec) {
		t.Helper()
		got := []string{ps.Containers[0].Image, ps.Containers[1].Image, ps.InitContainers[0].Image, ps.EphemeralContainers[0].Image}
		want := []string{"registry.internal/dockerhub/library/nginx:1.27", "mirror.example/org/b", "registry.internal/dockerhub/library/busybox", "registry.internal/dockerhub/library/alpine"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("images %v, want %v", got, want)
		}
	}
	for name, obj := range map[string]client.Object{
		"Pod":        &corev1.Pod{Spec: spec()},
		"Deployment": &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec()}}},
		"CronJob":    &batchv1.CronJob{Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec()}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := funcs[hooks.UpdatePhysical](t.Context(), obj)
			if err != nil {
				t.Fatal(err)
			}
			switch o := out.(type) {
			case *corev1.Pod:
				check(t, o.Spec)
			case *appsv1.Deployment:
				check(t, o.Spec.Template.Spec)
			case *batchv1.CronJob:
				check(t, o.Spec.JobTemplate.Spec.Template.Spec)
			}
		})
	}
	t.Run("GetPhysical maps the kubelet's report back", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{
			ContainerStatuses:     []corev1.ContainerStatus{{Image: "registry.internal/dockerhub/library/nginx:1.27"}, {Image: "mirror.example/org/b:latest"}},
			InitContainerStatuses: []corev1.ContainerStatus{{Image: "registry.internal/dockerhub/library/busybox:latest"}, {Image: "elsewhere.example/x:1"}},
		}}
		out, err := funcs[hooks.GetPhysical](t.Context(), pod)
		if err != nil {
			t.Fatal(err)
		}
		s := out.(*corev1.Pod).Status
		got := []string{s.ContainerStatuses[0].Image, s.ContainerStatuses[1].Image, s.InitContainerStatuses[0].Image, s.InitContainerStatuses[1].Image}
		want := []string{"docker.io/library/nginx:1.27", "ghcr.io/org/b:latest", "docker.io/library/busybox:latest", "elsewhere.example/x:1"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("status images %v, want %v", got, want)
		}
	})
}

func TestImageRefusesRulesThatRewriteTheirOwnOutput(t *testing.T) {
	for name, tt := range map[string]struct {
		rules []builtin.ImageRule
		want  string
	}{
		"a to under its own from":   {[]builtin.ImageRule{{From: "ghcr.io", To: "ghcr.io/mirror"}}, `rules[0].to "ghcr.io/mirror" and rules[0].from "ghcr.io" overlap`},
		"a to under another's from": {[]builtin.ImageRule{{From: "docker.io", To: "mirror.example"}, {From: "mirror.example/library", To: "x.example"}}, `rules[0].to "mirror.example" and rules[1].from "mirror.example/library" overlap`},
		"a Hub path to is Hub":      {[]builtin.ImageRule{{From: "docker.io", To: "mirror/dockerhub"}}, `(docker.io/mirror/dockerhub, docker.io)`},
		"a from with a tag":         {[]builtin.ImageRule{{From: "ghcr.io/org:1", To: "mirror.example"}}, `rules[0].from "ghcr.io/org:1": not the start of an image name`},
		"a from with a trailing /":  {[]builtin.ImageRule{{From: "ghcr.io/", To: "mirror.example"}}, `rules[0].from "ghcr.io/"`},
		"an uppercase repository":   {[]builtin.ImageRule{{From: "ghcr.io/Org", To: "mirror.example"}}, `must be lowercase`},
		"an empty to":               {[]builtin.ImageRule{{From: "ghcr.io", To: ""}}, `rules[0].to "": empty`},
		"the same from twice":       {[]builtin.ImageRule{{From: "ghcr.io", To: "a.example"}, {From: "ghcr.io", To: "b.example"}}, `rules[1].from "ghcr.io" is rules[0].from "ghcr.io" again`},
		"no rules":                  {nil, "at least one rule"},
	} {
		err := builtin.CheckImage(builtin.Image{Rules: tt.rules})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, builtin.ErrImageRule) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tt.want)
		}
	}
	if err := builtin.CheckImage(mirrorRules); err != nil {
		t.Fatalf("the mirror rules: %v", err)
	}
}

// FuzzImageRewrite: under a valid rule set the rewrite never panics, never makes an image that
// is not a reference, and rewriting a rewritten image changes nothing.
func FuzzImageRewrite(f *testing.F) {
	for _, s := range []string{"nginx", "nginx:1.27@" + digest, "ghcr.io/org/app", "localhost:5000/a", "quay.io/team/special/x:1", "Nginx", "a/b/c/d:e"} {
		f.Add(s, "docker.io", "registry.internal/dockerhub")
	}
	f.Fuzz(func(t *testing.T, image, from, to string) {
		rules := builtin.Image{Rules: append([]builtin.ImageRule{{From: from, To: to}}, mirrorRules.Rules...)}
		if builtin.CheckImage(rules) != nil {
			t.Skip()
		}
		funcs, err := builtin.ImageFuncs("fuzz", rules, []hooks.HookType{hooks.CreatePhysical})
		if err != nil {
			t.Fatal(err)
		}
		once := func(img string) (string, error) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: img}}}}
			out, err := funcs[hooks.CreatePhysical](t.Context(), pod)
			if err != nil {
				return "", err
			}
			return out.(*corev1.Pod).Spec.Containers[0].Image, nil
		}
		first, err := once(image)
		if errors.Is(err, builtin.ErrImageRewrite) && builtin.IsImageReference(image) {
			return // refused: the rule would make it too long
		}
		if err != nil {
			t.Fatalf("%q: %v", image, err)
		}
		second, err := once(first)
		if err != nil {
			t.Fatalf("%q → %q → %v", image, first, err)
		}
		if second != first {
			t.Fatalf("%q → %q → %q: a rewritten image was rewritten again", image, first, second)
		}
		if first != image && !builtin.IsImageReference(first) {
			t.Fatalf("%q → %q, which is not an image reference", image, first)
		}
	})
}

// A rule's from and to are read as images are: the host in any case, with or without :443,
// Docker Hub under any of its names.
func TestImageRuleFromIsTheRegistryAsResolved(t *testing.T) {
	for from, image := range map[string]string{
		"GHCR.io/org":          "ghcr.io/org/app",
		"ghcr.io:443/org":      "GHCR.IO/org/app",
		"registry-1.docker.io": "nginx",
		"index.docker.io":      "registry-1.docker.io:443/library/nginx",
	} {
		funcs, err := builtin.ImageFuncs("mirror", builtin.Image{Rules: []builtin.ImageRule{{From: from, To: "mirror.example/x"}}}, []hooks.HookType{hooks.CreatePhysical})
		if err != nil {
			t.Fatalf("from %q: %v", from, err)
		}
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: image}}}}
		out, err := funcs[hooks.CreatePhysical](t.Context(), pod)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.(*corev1.Pod).Spec.Containers[0].Image; !strings.HasPrefix(got, "mirror.example/x/") {
			t.Errorf("from %q, image %q → %q: not rewritten", from, image, got)
		}
	}
	err := builtin.CheckImage(builtin.Image{Rules: []builtin.ImageRule{{From: "docker.io", To: "a.example"}, {From: "REGISTRY-1.docker.io:443", To: "b.example"}}})
	if err == nil || !strings.Contains(err.Error(), `rules[1].from "REGISTRY-1.docker.io:443" is rules[0].from "docker.io" again`) {
		t.Errorf("two spellings of Docker Hub as two rules: %v", err)
	}
}

// A valid name that the rule would make longer than a reference may be is refused with an
// error naming the image and the rule, never passed through to the host unrewritten.
func TestImageRewriteThatWouldNotBeAReferenceIsRefused(t *testing.T) {
	// a repository path (the name after the registry) of 247 characters, 260 under the rule's
	// to: distribution/reference takes 255 at most
	long := "ghcr.io/org/" + strings.Repeat("a", 255-len("ghcr.io/org/"))
	if !builtin.IsImageReference(long) {
		t.Fatalf("the case's image is not a reference")
	}
	funcs, err := builtin.ImageFuncs("mirror", builtin.Image{Rules: []builtin.ImageRule{{From: "ghcr.io/org", To: "registry.internal/mirrors/ghcr/org"}}}, []hooks.HookType{hooks.CreatePhysical})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "a", Image: "ghcr.io/org/ok"}, {Name: "b", Image: long + ":1"}},
	}}
	_, err = funcs[hooks.CreatePhysical](t.Context(), pod)
	if !errors.Is(err, builtin.ErrImageRewrite) || !strings.Contains(err.Error(), long+":1") ||
		!strings.Contains(err.Error(), `rules[0] (from "ghcr.io/org", to "registry.internal/mirrors/ghcr/org")`) {
		t.Fatalf("rewrite past 255 characters: %v, want an ErrImageRewrite naming the image and the rule", err)
	}
}

// An image volume (spec.volumes[].image.reference) is pulled by the kubelet like a container
// image: it is rewritten too, and its mount status's imageRef reads back like an imageID.
func TestImageVolumesAndImageIDs(t *testing.T) {
	funcs, err := builtin.ImageFuncs("mirror", mirrorRules, []hooks.HookType{hooks.CreatePhysical, hooks.GetPhysical})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "a", Image: "registry.example.com/app:1"}},
		Volumes: []corev1.Volume{
			{Name: "models", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "ghcr.io/org/models:v2"}}},
			{Name: "tools", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "busybox"}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}}
	out, err := funcs[hooks.CreatePhysical](t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	vols := out.(*corev1.Pod).Spec.Volumes
	if got := vols[0].Image.Reference + " " + vols[1].Image.Reference; got != "mirror.example/org/models:v2 registry.internal/dockerhub/library/busybox" {
		t.Errorf("image volumes %s", got)
	}
	status := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name:    "a",
		Image:   "registry.internal/dockerhub/library/nginx:1.27",
		ImageID: "registry.internal/dockerhub/library/nginx@" + digest,
		VolumeMounts: []corev1.VolumeMountStatus{
			{Name: "models", VolumeStatus: &corev1.VolumeStatus{Image: &corev1.ImageVolumeStatus{ImageRef: "mirror.example/org/models@" + digest}}},
			{Name: "scratch"},
		},
	}, {
		Name: "b", Image: "mirror.example/org/b:1", ImageID: "docker-pullable://mirror.example/org/b@" + digest,
	}, {
		Name: "c", Image: "elsewhere.example/c:1", ImageID: "sha256:" + strings.TrimPrefix(digest, "sha256:"),
	}}}}
	out, err = funcs[hooks.GetPhysical](t.Context(), status)
	if err != nil {
		t.Fatal(err)
	}
	cs := out.(*corev1.Pod).Status.ContainerStatuses
	got := []string{cs[0].ImageID, cs[0].VolumeMounts[0].VolumeStatus.Image.ImageRef, cs[1].ImageID, cs[2].ImageID}
	want := []string{"docker.io/library/nginx@" + digest, "ghcr.io/org/models@" + digest, "docker-pullable://ghcr.io/org/b@" + digest, "sha256:" + strings.TrimPrefix(digest, "sha256:")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("image IDs\n got %v\nwant %v", got, want)
	}
}
