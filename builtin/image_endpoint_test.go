package builtin_test

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
)

// oracleEndpoint is the endpoint a runtime dials for a reference's domain, worked out
// independently of the hook: net.SplitHostPort, the address by net/netip, the port as a number
// (443 when none is given), Docker Hub's names as one.
func oracleEndpoint(domain string) string {
	host, port, err := net.SplitHostPort(domain)
	if err != nil {
		host, port = domain, "443"
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n)
	}
	switch host {
	case "docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		if port == "443" {
			return "docker hub"
		}
	}
	return net.JoinHostPort(host, port)
}

// The image rule against an independent endpoint oracle, over every spelling of a registry
// this test can mine: case, the port with leading zeros, IPv6 forms, Docker Hub's names, tags
// and digests. An image is rewritten iff the endpoint it is pulled from is the rule's and its
// path is under the rule's; tag and digest are kept.
func TestImageRulesMatchTheEndpointTheRuntimeDials(t *testing.T) {
	hosts := []string{
		"ghcr.io", "GHCR.IO", "Ghcr.Io", "ghcr.io.evil.example", "quay.io",
		"docker.io", "Docker.IO", "index.docker.io", "INDEX.docker.io", "registry-1.docker.io",
		"REGISTRY-1.docker.io", "registry.hub.docker.com", "Registry.Hub.Docker.Com",
		"localhost", "LOCALHOST", "10.0.0.1", "010.0.0.1",
		"[fd00::1]", "[fd00:0::1]", "[FD00:0:0:0:0:0:0:1]", "[fd00::0:1]", "[fd00::2]",
	}
	ports := []string{"", ":443", ":0443", ":00443", ":4430", ":5000", ":05000", ":8443"}
	paths := []string{"library/nginx", "org/app", "org/team/app", "organization/app", "team/x", "nginx"}
	suffixes := []string{"", ":1.27", "@" + digest, ":v1@" + digest}
	var images []string
	for _, h := range hosts {
		for _, p := range ports {
			for _, path := range paths {
				for _, s := range suffixes {
					images = append(images, h+p+"/"+path+s)
				}
			}
		}
	}
	for _, path := range paths {
		for _, s := range suffixes {
			images = append(images, path+s)
		}
	}
	ruleSets := []builtin.ImageRule{
		{From: "docker.io", To: "mirror.internal/hub"},
		{From: "ghcr.io/org", To: "mirror.internal/ghcr"},
		{From: "GHCR.io:0443", To: "mirror.internal/g"},
		{From: "[fd00:0::1]:5000", To: "mirror.internal/v6"},
		{From: "LOCALHOST:05000/team", To: "mirror.internal/local"},
		{From: "registry.hub.docker.com:443/library", To: "mirror.internal/lib"},
		{From: "10.0.0.1:5000/org", To: "mirror.internal/ip"},
	}
	checked, rewritten := 0, 0
	for _, rule := range ruleSets {
		funcs, err := builtin.ImageFuncs("mirror", builtin.Image{Rules: []builtin.ImageRule{rule}}, []hooks.HookType{hooks.CreatePhysical})
		if err != nil {
			t.Fatal(err)
		}
		ruleDomain, rulePath, _ := strings.Cut(rule.From, "/")
		for _, image := range images {
			n, err := reference.ParseNormalizedNamed(image)
			if err != nil {
				continue // not a reference: left alone, tested elsewhere
			}
			path := reference.Path(n)
			want := oracleEndpoint(reference.Domain(n)) == oracleEndpoint(ruleDomain) &&
				(rulePath == "" || path == rulePath || strings.HasPrefix(path, rulePath+"/"))
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: image}}}}
			out, err := funcs[hooks.CreatePhysical](t.Context(), pod)
			if err != nil {
				t.Fatalf("rule %+v, image %q: %v", rule, image, err)
			}
			got := out.(*corev1.Pod).Spec.Containers[0].Image
			checked++
			switch {
			case want && !strings.HasPrefix(got, rule.To+"/"):
				t.Errorf("rule from %q: image %q pulled from %s is left as %q, want it under %q", rule.From, image, oracleEndpoint(reference.Domain(n)), got, rule.To)
			case !want && got != image:
				t.Errorf("rule from %q: image %q pulled from %s is rewritten to %q, want it left alone", rule.From, image, oracleEndpoint(reference.Domain(n)), got)
			case want:
				rewritten++
				tagAndDigest := ""
				if t, ok := n.(reference.Tagged); ok {
					tagAndDigest = ":" + t.Tag()
				}
				if d, ok := n.(reference.Digested); ok {
					tagAndDigest += "@" + d.Digest().String()
				}
				if !strings.HasSuffix(got, tagAndDigest) {
					t.Errorf("rule from %q: image %q → %q, lost its tag or digest %q", rule.From, image, got, tagAndDigest)
				}
			}
		}
	}
	if checked < 1000 || rewritten < 100 {
		t.Fatalf("checked %d spellings, %d rewritten: the test mines too little", checked, rewritten)
	}
	t.Logf("%d spellings under %d rules, %d rewritten", checked, len(ruleSets), rewritten)
}
