// Package tenanttest is the tenant attack suite of the tenant model (README, "Guarantees"):
// the attacks a tenant can make through what it writes on a virtual object — forged
// synchook.io/undo and synchook.io/mutated-by annotations, inflated undos, malformed undos in a
// List — as cases that every transport's tests run through their own wire (admission, v1
// bridge, v2 via go-plugin, hookclient), so that each guarantee is proven on each transport.
//
// A transport test builds its server from Registry (or serves Config the way its binary
// does), wraps one call in a Mutator and calls Run. Cases that need a List are skipped for a
// Mutator that says it cannot send one (vcluster's plugin protocols send single objects).
package tenanttest

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// Config is the platform's config the cases assume: a labels hook on Pods for every write
// type whose undo is read back on GetPhysical and GetVirtual, a labels hook on Services for
// CreatePhysical only (the kind whose updates never pass through synchook), a strip of a
// Secret's password on its way to the host, and a mirror of Docker Hub's and ghcr.io/org's
// images for Pods on their writes (the cases' own image, registry.example.com/web:1, is under
// neither; not on GetPhysical, which would decode every 1 MB read case's Pod: the mapping back
// of the kubelet's report is builtin's TestImageVolumesAndImageIDs and examples/features).
const Config = `hooks:
  - name: platform-labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical, CreateVirtual, UpdateVirtual]
    labels:
      labels: {platform.example.com/team: a}
  - name: create-only
    resources: [{apiVersion: v1, kind: Service}]
    types: [CreatePhysical]
    labels:
      labels: {platform.example.com/team: a}
  - name: strip-password
    resources: [{apiVersion: v1, kind: Secret}]
    types: [CreatePhysical, UpdatePhysical]
    strip:
      paths: [/data/password]
  - name: mirror
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    image:
      rules:
        - {from: docker.io, to: registry.internal/dockerhub}
        - {from: ghcr.io/org, to: mirror.example/org}
`

// ring is the undo key of every Registry of a test process.
var ring = sync.OnceValue(func() *undo.Ring {
	r, err := undo.GenerateRing()
	if err != nil {
		panic(err)
	}
	return r
})

// Registry returns a registry with Config's hooks, undo on and an undo key, as the synchook
// binary runs as a vcluster plugin v2 (or with --undo-key-file).
func Registry(t testing.TB) *engine.Registry {
	return build(t, undo.NewKeeper(ring()))
}

// RegistryWithoutKey is Registry before its undo key is loaded (a vcluster plugin v2 whose
// host is not reachable yet): a hooked write is refused, a read applies nothing.
func RegistryWithoutKey(t testing.TB) *engine.Registry {
	return build(t, nil)
}

func build(t testing.TB, keys *undo.Keeper) *engine.Registry {
	t.Helper()
	cfg, err := config.Parse([]byte(Config))
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
	if err := cfg.Build(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

// ServiceGVK is v1 Service, the kind hooked on CreatePhysical only.
var ServiceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Service"}

// SecretGVK is v1 Secret, whose password the config strips.
var SecretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// secretCanary is the password of the cases' Secret: no form of it may reach the host.
const secretCanary = "tenant-canary-password-7f3a"

// Mutator sends obj (JSON) to the transport under test for hook type typ and kind gvk, with
// the request deadline the transport takes, and returns the object after the transport's
// answer is applied the way its caller applies it (the object itself when nothing changed),
// or the error the transport answered.
type Mutator func(t *testing.T, typ hooks.HookType, gvk schema.GroupVersionKind, obj []byte) ([]byte, error)

// Transport describes the transport under test.
type Transport struct {
	// Mutate calls it once.
	Mutate Mutator
	// Lists says it can send a List (PodList) as one request.
	Lists bool
}

// PodGVK is v1 Pod, the kind of every case.
var PodGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

// PodListGVK is v1 PodList.
var PodListGVK = schema.GroupVersionKind{Version: "v1", Kind: "PodList"}

// Run runs every case against tr, each as a subtest.
func Run(t *testing.T, tr Transport) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.list && !tr.Lists {
				t.Skip("the transport sends single objects only (vcluster sends a List one item per call)")
			}
			c.run(t, tr.Mutate)
		})
	}
}

type attack struct {
	name string
	list bool
	run  func(t *testing.T, m Mutator)
}

var cases = []attack{
	{name: "a forged undo that renames the object to another host object is dropped: identity never changes", run: func(t *testing.T, m Mutator) {
		for _, read := range []hooks.HookType{hooks.GetPhysical, hooks.GetVirtual} {
			stored := Pod("web", forged(`[{"path":"/metadata/name","hooked":"web","original":"vcluster-0"},{"path":"/metadata/namespace","hooked":"team-a","original":"vcluster"},{"path":"/metadata/uid","hooked":"u-web","original":"u-cp"}]`))
			expectView(t, m, read, stored, stored)
		}
	}},
	{name: "a forged undo that adds absent fields (ownerReferences, deletionTimestamp, securityContext) is dropped", run: func(t *testing.T, m Mutator) {
		stored := Pod("web", forged(`[{"path":"/metadata/ownerReferences","original":[{"apiVersion":"v1","kind":"Node","name":"n1","uid":"u-n1"}]},{"path":"/metadata/deletionTimestamp","original":"2026-01-01T00:00:00Z"},{"path":"/spec/securityContext","original":{"runAsUser":0,"privileged":true}}]`))
		for _, read := range []hooks.HookType{hooks.GetPhysical, hooks.GetVirtual} {
			expectView(t, m, read, stored, stored)
		}
	}},
	{name: "a forged undo that rewrites labels is dropped", run: func(t *testing.T, m Mutator) {
		stored := Pod("web", forged(`[{"path":"/metadata/labels/app","hooked":"web","original":"admin"},{"path":"/metadata/labels/platform.example.com~1team","hooked":"a","original":"b"}]`))
		expectView(t, m, hooks.GetPhysical, stored, stored)
	}},
	{name: "a forged undo of 10,000 entries on a 1 MB object is answered at once and dropped", run: func(t *testing.T, m Mutator) {
		var b strings.Builder
		b.WriteString("[")
		for i := range 10000 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"path":"/spec/containers/0/env/%d","hooked":{"name":"X","value":"%d"}}`, i, i)
		}
		b.WriteString("]")
		stored := Pod("web", forged(b.String()), withEnv(14000))
		if len(stored) < 1<<20 {
			t.Fatalf("object is %d bytes, want at least 1 MB", len(stored))
		}
		expectView(t, m, hooks.GetPhysical, stored, stored)
	}},
	{name: "an undo of as many entries as fit in the size limit, on a 1 MB object, is applied in one pass and dropped", run: func(t *testing.T, m Mutator) {
		first := `{"name":"VAR_000000","value":"` + strings.Repeat("v", 48) + `"}`
		entry := `{"path":"/spec/containers/0/env/0","hooked":` + first + `}`
		n := (undo.DefaultMaxBytes - 2) / (len(entry) + 1)
		stored := Pod("web", forged("["+strings.TrimSuffix(strings.Repeat(entry+",", n), ",")+"]"), withEnv(14000))
		expectView(t, m, hooks.GetPhysical, stored, stored)
	}},
	{name: "a malformed undo in one item of a List does not fail the read of the List", list: true, run: func(t *testing.T, m Mutator) {
		good := Pod("good", nil)
		bad := Pod("bad", forged(`{not json`))
		list := []byte(`{"apiVersion":"v1","kind":"PodList","metadata":{},"items":[` + string(good) + `,` + string(bad) + `]}`)
		out, err := m(t, hooks.GetPhysical, PodListGVK, list)
		if err != nil {
			t.Fatalf("GetPhysical of a PodList with a malformed undo in one item: %v", err)
		}
		if !SameJSON(out, list) {
			t.Errorf("the List changed:\nsent %s\ngot  %s", list, out)
		}
	}},
	{name: "a tenant-set synchook.io/mutated-by never reaches the host as written, even on a no-op chain", run: func(t *testing.T, m Mutator) {
		sent := Pod("web", map[string]string{undo.ProvenanceAnnotation: "platform-labels@v9#deadbeef"})
		for _, write := range []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical} {
			hooked, err := m(t, write, PodGVK, sent)
			if err != nil {
				t.Fatalf("%s: %v", write, err)
			}
			if got := Annotation(t, hooked, undo.ProvenanceAnnotation); got == "platform-labels@v9#deadbeef" {
				t.Errorf("%s stored the tenant's %s as written", write, undo.ProvenanceAnnotation)
			}
			expectView(t, m, hooks.GetPhysical, hooked, sent)
		}
	}},
	{name: "a tenant-set synchook.io/undo on a no-op chain never reaches the host as written, and reads back as the tenant wrote it", run: func(t *testing.T, m Mutator) {
		tenant := `[{"path":"/metadata/name","hooked":"web","original":"vcluster-0"}]`
		sent := Pod("web", forged(tenant))
		for write, read := range map[hooks.HookType]hooks.HookType{hooks.CreatePhysical: hooks.GetPhysical, hooks.UpdateVirtual: hooks.GetVirtual} {
			hooked, err := m(t, write, PodGVK, sent)
			if err != nil {
				t.Fatalf("%s: %v", write, err)
			}
			if got := Annotation(t, hooked, undo.Annotation); got == tenant {
				t.Fatalf("%s stored the tenant's undo as written", write)
			}
			// The syncer reads back what it sent: no difference for it to write again.
			expectView(t, m, read, hooked, sent)
		}
	}},
	{name: "a sealed-looking undo the tenant wrote never opens and is dropped", run: func(t *testing.T, m Mutator) {
		for _, v := range []string{"s1." + ring().IDs()[0] + ".AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "s1.x.y", "s1."} {
			stored := Pod("web", forged(v))
			for _, read := range []hooks.HookType{hooks.GetPhysical, hooks.GetVirtual} {
				expectView(t, m, read, stored, stored)
			}
		}
	}},
	{name: "synchook's own sealed undo copied to another object, or to the other cluster, is dropped there", run: func(t *testing.T, m Mutator) {
		hooked, err := m(t, hooks.CreatePhysical, PodGVK, Pod("web", nil, withoutPlatformLabel))
		if err != nil {
			t.Fatal(err)
		}
		sealed := Annotation(t, hooked, undo.Annotation)
		if !undo.IsSealed(sealed) {
			t.Skip("no key: a clear-text undo is verified against the object it is on, not bound to one")
		}
		other := Pod("admin", forged(sealed))
		expectView(t, m, hooks.GetPhysical, other, other)
		// The same object read on the virtual side: the undo was sealed for the host.
		expectView(t, m, hooks.GetVirtual, hooked, hooked)
	}},
	{name: "on a kind hooked on CreatePhysical only, a tenant's undo is never applied", run: func(t *testing.T, m Mutator) {
		for _, v := range []string{
			`[{"path":"/metadata/labels/platform.example.com~1team","hooked":"b","original":"a"}]`,
			"s1." + ring().IDs()[0] + ".AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		} {
			stored := service("web", map[string]string{"platform.example.com/team": "b"}, forged(v))
			view, err := m(t, hooks.GetPhysical, ServiceGVK, stored)
			if err != nil {
				t.Fatalf("GetPhysical: %v", err)
			}
			if !SameJSON(view, stored) {
				t.Errorf("the tenant's undo was applied on the Create-only kind:\nstored %s\nview   %s", stored, view)
			}
		}
	}},
	{name: "a Secret's stripped password reaches the host in no form, or is refused without a key", run: func(t *testing.T, m Mutator) {
		sent := secret("db")
		hooked, err := m(t, hooks.CreatePhysical, SecretGVK, sent)
		if err != nil {
			if !strings.Contains(err.Error(), "undo key") {
				t.Fatalf("CreatePhysical: %v, want the change done or refused for want of an undo key", err)
			}
			for _, form := range canaryForms() {
				if strings.Contains(err.Error(), form) {
					t.Fatal("the error holds a form of the Secret value")
				}
			}
			return
		}
		for _, form := range canaryForms() {
			if strings.Contains(string(hooked), form) {
				t.Fatalf("the host Secret holds a form of the value: %.300s", hooked)
			}
		}
		view, err := m(t, hooks.GetPhysical, SecretGVK, hooked)
		if err != nil {
			t.Fatal(err)
		}
		if !SameJSON(view, sent) {
			t.Errorf("the read does not give the tenant's Secret back:\nsent %s\nview %s", sent, view)
		}
	}},
	{name: "a clear-text undo that fits the object is never applied on a write: fields the syncer sets stay as sent", run: func(t *testing.T, m Mutator) {
		// Each entry's hooked is what the object holds: the test a keyless build trusted.
		tenant := `[{"path":"/spec/serviceAccountName","hooked":"default","original":"platform-admin"},` +
			`{"path":"/spec/automountServiceAccountToken","hooked":false,"original":true},` +
			`{"path":"/spec/nodeSelector","hooked":{"pool":"tenant"},"original":{"pool":"system"}},` +
			`{"path":"/metadata/labels/vcluster.loft.sh~1managed-by","hooked":"vcluster","original":"other"}]`
		sent := Pod("web", forged(tenant), withSyncerFields)
		for _, write := range []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical} {
			hooked, err := m(t, write, PodGVK, sent)
			if err != nil {
				t.Fatalf("%s: %v", write, err)
			}
			for _, f := range syncerFields {
				if got, want := field(t, hooked, f), field(t, sent, f); got != want {
					t.Errorf("%s changed %s to %s (sent %s): a tenant's undo was applied", write, f, got, want)
				}
			}
			expectView(t, m, hooks.GetPhysical, hooked, sent)
		}
	}},
	{name: "the sealed undo of a deleted and re-created object of the same name does not open on the new one", run: func(t *testing.T, m Mutator) {
		hooked, err := m(t, hooks.CreatePhysical, PodGVK, Pod("web", nil, withoutPlatformLabel))
		if err != nil {
			t.Fatal(err)
		}
		recreated := []byte(strings.Replace(string(hooked), `"uid":"u-web"`, `"uid":"u-web-2"`, 1))
		if string(recreated) == string(hooked) {
			t.Fatal("the case could not change the uid")
		}
		expectView(t, m, hooks.GetPhysical, recreated, recreated)
	}},
	{name: "a Create with generateName reads back clean once the object is named, and only under that prefix", run: func(t *testing.T, m Mutator) {
		sent := Pod("", nil, withoutPlatformLabel, withGenerateName("web-"))
		hooked, err := m(t, hooks.CreatePhysical, PodGVK, sent)
		if err != nil {
			t.Fatal(err)
		}
		named := renamed(t, hooked, "web-x7k2p")
		expectView(t, m, hooks.GetPhysical, named, renamed(t, sent, "web-x7k2p"))
		other := renamed(t, hooked, "db-x7k2p")
		expectView(t, m, hooks.GetPhysical, other, other)
	}},
	{name: "the platform's own undo still works: a write then its read give back what the syncer sent", run: func(t *testing.T, m Mutator) {
		sent := Pod("web", nil, withoutPlatformLabel)
		hooked, err := m(t, hooks.CreatePhysical, PodGVK, sent)
		if err != nil {
			t.Fatal(err)
		}
		if SameJSON(hooked, sent) {
			t.Fatal("the labels hook changed nothing")
		}
		expectView(t, m, hooks.GetPhysical, hooked, sent)
	}},
	{name: "an image spelled as another name of its registry reaches the host through the mirror, and reads back as spelled", run: func(t *testing.T, m Mutator) {
		// host case, the HTTPS default port, Docker Hub's endpoint, an image volume (pulled by the kubelet too)
		spelled := []string{"GHCR.IO/org/app:2", "ghcr.io:443/org/app", "registry-1.docker.io/library/nginx:1.27", "Docker.IO/library/busybox"}
		want := []string{"mirror.example/org/app:2", "mirror.example/org/app", "registry.internal/dockerhub/library/nginx:1.27", "registry.internal/dockerhub/library/busybox"}
		sent := Pod("web", nil, withImages(spelled[:3]...), withImageVolume("tools", spelled[3]))
		paths := []string{"/spec/containers/0/image", "/spec/containers/1/image", "/spec/containers/2/image", "/spec/volumes/0/image/reference"}
		for _, write := range []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical} {
			hooked, err := m(t, write, PodGVK, sent)
			if err != nil {
				t.Fatalf("%s: %v", write, err)
			}
			for i, p := range paths {
				if got := field(t, hooked, p); got != `"`+want[i]+`"` {
					t.Errorf("%s: %s %q reached the host as %s, want %q", write, p, spelled[i], got, want[i])
				}
			}
			expectView(t, m, hooks.GetPhysical, hooked, sent)
		}
	}},
	{name: "an image the mirror would make longer than a name may be is refused, never passed through", run: func(t *testing.T, m Mutator) {
		// a repository path of 255 characters, the most distribution/reference takes; 265 under the mirror's dockerhub/
		long := "docker.io/myorg/" + strings.Repeat("a", 255-len("myorg/"))
		for _, write := range []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical} {
			hooked, err := m(t, write, PodGVK, Pod("web", nil, withImages(long)))
			if err == nil {
				t.Errorf("%s of an image the rule makes invalid: no error, host image %s", write, field(t, hooked, "/spec/containers/0/image"))
			} else if !strings.Contains(err.Error(), "image rewrite refused") {
				t.Errorf("%s: %v, want the image rewrite refused", write, err)
			}
		}
	}},
	{name: "a Create's name-bound seal copied onto a deleted and re-created object of the same name does not open there", run: func(t *testing.T, m Mutator) {
		for _, sides := range [][2]hooks.HookType{{hooks.CreateVirtual, hooks.GetVirtual}, {hooks.CreatePhysical, hooks.GetPhysical}} {
			sent := withoutUID(t, Pod("web", nil, withoutPlatformLabel))
			hooked, err := m(t, sides[0], PodGVK, sent)
			if err != nil {
				t.Fatal(err)
			}
			seal := Annotation(t, hooked, undo.Annotation)
			if !strings.HasPrefix(seal, "s2.n.") {
				t.Fatalf("%s sealed %.8q, want a name-bound seal", sides[0], seal)
			}
			// the object the Create made: the read right after it takes the hooks' change off
			now := time.Now()
			expectView(t, m, sides[1], created(t, hooked, "u-web", now), created(t, sent, "u-web", now))
			// the tenant deletes it and creates it again minutes later, pasting the copied seal
			// and the hooked value: the view is the object as stored, nothing of the old record
			recreated := created(t, hooked, "u-web-2", now.Add(5*time.Minute))
			expectView(t, m, sides[1], recreated, recreated)
		}
	}},
	{name: "a host seal bound to metadata.uid does not open where vcluster's object-uid has that value, nor the reverse", run: func(t *testing.T, m Mutator) {
		// a host object without vcluster's object-uid: sealed with its metadata.uid
		plain := Pod("web", nil, withoutPlatformLabel)
		hooked, err := m(t, hooks.UpdatePhysical, PodGVK, plain)
		if err != nil {
			t.Fatal(err)
		}
		pinned := withAnnotation(t, withUIDValue(t, hooked, "u-other"), undo.ObjectUIDAnnotation, "u-web")
		expectView(t, m, hooks.GetPhysical, pinned, pinned)
		// a host object with vcluster's object-uid: sealed with it
		synced := withAnnotation(t, withUIDValue(t, Pod("web", nil, withoutPlatformLabel), "u-host"), undo.ObjectUIDAnnotation, "u-virtual")
		hooked, err = m(t, hooks.UpdatePhysical, PodGVK, synced)
		if err != nil {
			t.Fatal(err)
		}
		swapped := withoutAnnotation(t, withUIDValue(t, hooked, "u-virtual"), undo.ObjectUIDAnnotation)
		expectView(t, m, hooks.GetPhysical, swapped, swapped)
		expectView(t, m, hooks.GetPhysical, hooked, synced) // its own object still reads back
	}},
}

// editMeta returns doc with edit applied to its metadata.
func editMeta(t testing.TB, doc []byte, edit func(meta map[string]any)) []byte {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(doc, &o); err != nil {
		t.Fatal(err)
	}
	edit(o["metadata"].(map[string]any))
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withoutUID returns doc without metadata.uid: a Create before the apiserver gives one.
func withoutUID(t testing.TB, doc []byte) []byte {
	return editMeta(t, doc, func(meta map[string]any) { delete(meta, "uid") })
}

// withUIDValue returns doc with metadata.uid uid.
func withUIDValue(t testing.TB, doc []byte, uid string) []byte {
	return editMeta(t, doc, func(meta map[string]any) { meta["uid"] = uid })
}

// created returns doc as the apiserver stores a Create of it: metadata.uid uid and
// metadata.creationTimestamp at (whole seconds, UTC).
func created(t testing.TB, doc []byte, uid string, at time.Time) []byte {
	return editMeta(t, doc, func(meta map[string]any) {
		meta["uid"], meta["creationTimestamp"] = uid, at.UTC().Format(time.RFC3339)
	})
}

// withAnnotation returns doc with the annotation key set to value.
func withAnnotation(t testing.TB, doc []byte, key, value string) []byte {
	return editMeta(t, doc, func(meta map[string]any) {
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		ann[key] = value
		meta["annotations"] = ann
	})
}

// withoutAnnotation returns doc without the annotation key.
func withoutAnnotation(t testing.TB, doc []byte, key string) []byte {
	return editMeta(t, doc, func(meta map[string]any) {
		if ann, _ := meta["annotations"].(map[string]any); ann != nil {
			delete(ann, key)
		}
	})
}

// withImages gives the Pod one container per image (web-0, web-1, …) instead of its own.
func withImages(images ...string) podOption {
	return func(p map[string]any) {
		containers := make([]any, len(images))
		for i, img := range images {
			containers[i] = map[string]any{"name": fmt.Sprintf("web-%d", i), "image": img}
		}
		p["spec"].(map[string]any)["containers"] = containers
	}
}

// withImageVolume adds an image volume (spec.volumes[].image) named name of reference ref.
func withImageVolume(name, ref string) podOption {
	return func(p map[string]any) {
		spec := p["spec"].(map[string]any)
		vols, _ := spec["volumes"].([]any)
		spec["volumes"] = append(vols, map[string]any{"name": name, "image": map[string]any{"reference": ref}})
	}
}

// ReadListItemByItem is the List case for a transport that sends single objects (Lists
// false): vcluster reads a List and calls its plugins with one item at a time, so the read of
// each item, the one with a malformed synchook.io/undo included, must succeed and give the
// item back as stored.
func ReadListItemByItem(t *testing.T, m Mutator) {
	t.Helper()
	for _, item := range [][]byte{Pod("good", nil), Pod("bad", forged(`{not json`))} {
		for _, read := range []hooks.HookType{hooks.GetPhysical, hooks.GetVirtual} {
			expectView(t, m, read, item, item)
		}
	}
}

// expectView reads stored through the read type read and fails unless the view equals want
// (and has stored's identity).
func expectView(t *testing.T, m Mutator, read hooks.HookType, stored, want []byte) {
	t.Helper()
	view, err := m(t, read, PodGVK, stored)
	if err != nil {
		t.Fatalf("%s: %v (a tenant's annotation must never fail a read)", read, err)
	}
	if Identity(t, view) != Identity(t, stored) {
		t.Fatalf("%s changed the identity: %v, stored %v", read, Identity(t, view), Identity(t, stored))
	}
	if !SameJSON(view, want) {
		t.Errorf("%s view differs from what it must be:\nwant %.600s\ngot  %.600s", read, want, view)
	}
}

// service returns the JSON of a v1 Service named name in namespace team-a with labels and
// annotations ann.
func service(name string, labels, ann map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name, "namespace": "team-a", "uid": "u-" + name, "labels": labels, "annotations": ann},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": 80}}},
	})
	return b
}

// secret returns the JSON of a v1 Secret named name whose password is secretCanary.
func secret(name string) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": map[string]any{"name": name, "namespace": "team-a", "uid": "u-" + name},
		"data":     map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(secretCanary)), "user": "YWRtaW4="},
	})
	return b
}

// canaryForms are the encodings of secretCanary that must never leave synchook.
func canaryForms() []string {
	v := []byte(secretCanary)
	return []string{secretCanary, base64.StdEncoding.EncodeToString(v), base64.RawStdEncoding.EncodeToString(v), base64.URLEncoding.EncodeToString(v), hex.EncodeToString(v)}
}

// forged returns annotations holding value as synchook.io/undo.
func forged(value string) map[string]string {
	return map[string]string{undo.Annotation: value}
}

type podOption func(map[string]any)

// withoutPlatformLabel leaves the platform's label off, so that the write chain adds it.
func withoutPlatformLabel(p map[string]any) {
	delete(p["metadata"].(map[string]any)["labels"].(map[string]any), "platform.example.com/team")
}

// syncerFields are fields of a host Pod that the syncer sets and the tenant cannot, as JSON
// Pointers (field reads them).
var syncerFields = []string{"/spec/serviceAccountName", "/spec/automountServiceAccountToken", "/spec/nodeSelector", "/metadata/labels/vcluster.loft.sh~1managed-by"}

// withSyncerFields sets syncerFields as the syncer would.
func withSyncerFields(p map[string]any) {
	spec := p["spec"].(map[string]any)
	spec["serviceAccountName"] = "default"
	spec["automountServiceAccountToken"] = false
	spec["nodeSelector"] = map[string]any{"pool": "tenant"}
	p["metadata"].(map[string]any)["labels"].(map[string]any)["vcluster.loft.sh/managed-by"] = "vcluster"
}

// withGenerateName makes the Pod nameless, uid-less and generated from prefix, as a Create
// with metadata.generateName is before the apiserver names it.
func withGenerateName(prefix string) podOption {
	return func(p map[string]any) {
		meta := p["metadata"].(map[string]any)
		delete(meta, "name")
		delete(meta, "uid")
		meta["generateName"] = prefix
	}
}

// renamed returns the JSON object doc named name, with uid u-<name>: what the apiserver makes
// of a Create with generateName.
func renamed(t testing.TB, doc []byte, name string) []byte {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(doc, &o); err != nil {
		t.Fatal(err)
	}
	meta := o["metadata"].(map[string]any)
	meta["name"], meta["uid"] = name, "u-"+name
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// field returns the JSON of the value at the JSON Pointer path of doc, keys sorted ("" when
// absent).
func field(t testing.TB, doc []byte, path string) string {
	t.Helper()
	tokens, err := patch.ParsePointer(path)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := jsonscan.Lookup(doc, tokens)
	if !ok {
		return ""
	}
	var o any
	if err := json.Unmarshal(v, &o); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(o)
	return string(b)
}

// withEnv gives the first container n environment variables of ~70 bytes each.
func withEnv(n int) podOption {
	return func(p map[string]any) {
		env := make([]any, n)
		for i := range env {
			env[i] = map[string]any{"name": fmt.Sprintf("VAR_%06d", i), "value": strings.Repeat("v", 48)}
		}
		p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"] = env
	}
}

// Pod returns the JSON of a v1 Pod named name in namespace team-a, uid u-<name>, that already
// carries the platform's label (so the write chain changes nothing else) and the annotations
// ann.
func Pod(name string, ann map[string]string, opts ...podOption) []byte {
	meta := map[string]any{
		"name": name, "namespace": "team-a", "uid": "u-" + name, // withGenerateName drops name and uid
		"labels": map[string]any{"app": "web", "platform.example.com/team": "a"},
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	p := map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": meta,
		"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "registry.example.com/web:1"}}},
	}
	for _, o := range opts {
		o(p)
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

// Annotation returns the annotation key of the JSON object doc ("" when absent).
func Annotation(t testing.TB, doc []byte, key string) string {
	t.Helper()
	var o struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(doc, &o); err != nil {
		t.Fatal(err)
	}
	return o.Metadata.Annotations[key]
}

// Identity returns apiVersion, kind, name, namespace and uid of the JSON object doc.
func Identity(t testing.TB, doc []byte) [5]string {
	t.Helper()
	var o struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			UID       string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(doc, &o); err != nil {
		t.Fatal(err)
	}
	return [5]string{o.APIVersion, o.Kind, o.Metadata.Name, o.Metadata.Namespace, o.Metadata.UID}
}

// Retyped is for a Mutator whose transport works on a typed object (vcluster's plugins decode
// into *corev1.Pod, hookclient encodes one): it returns sent, the JSON the case gave the
// Mutator, with exactly the change the transport made to the typed object applied. before is
// the JSON of the typed object decoded from sent as the transport's caller sends it, after its
// JSON once the caller applied the transport's answer. A typed round trip adds what the Go type
// always encodes ("status": {}, "resources": {}) to both before and after, so their difference
// is the transport's change alone and the case compares as strictly as on a raw JSON transport.
func Retyped(t testing.TB, sent, before, after []byte) []byte {
	t.Helper()
	ops, err := patch.Diff(before, after)
	if err != nil {
		t.Fatalf("diff the typed object before and after the answer: %v", err)
	}
	if ops, err = patch.Rebase(sent, ops); err != nil {
		t.Fatalf("rebase the typed change onto what the case sent: %v", err)
	}
	p, err := patch.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(sent, p)
	if err != nil {
		t.Fatalf("apply the typed change to what the case sent: %v", err)
	}
	return out
}

// SameJSON compares two JSON documents by meaning; empty labels/annotations maps count as
// absent (a typed round trip drops them).
func SameJSON(a, b []byte) bool {
	norm := func(doc []byte) any {
		var v any
		if json.Unmarshal(doc, &v) != nil {
			return string(doc)
		}
		dropEmptyMaps(v)
		return v
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func dropEmptyMaps(v any) {
	switch x := v.(type) {
	case map[string]any:
		if meta, ok := x["metadata"].(map[string]any); ok {
			for _, k := range []string{"labels", "annotations"} {
				if m, ok := meta[k].(map[string]any); ok && len(m) == 0 || meta[k] == nil {
					delete(meta, k)
				}
			}
		}
		for _, item := range x {
			dropEmptyMaps(item)
		}
	case []any:
		for _, item := range x {
			dropEmptyMaps(item)
		}
	}
}

// Typed returns a new typed object of gvk (a Pod, Service or Secret; a PodList), as the
// client-go scheme makes it; it fails the test for a kind the scheme does not know.
func Typed(t testing.TB, gvk schema.GroupVersionKind) client.Object {
	t.Helper()
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		t.Fatalf("no typed object for %s: %v", gvk, err)
	}
	co, ok := obj.(client.Object)
	if !ok {
		t.Fatalf("%s is no client.Object", gvk)
	}
	return co
}

// PluginCall sends one Mutate to a vcluster plugin (v1 or v2): the request's apiVersion, kind,
// hook type and object JSON; it answers the returned object JSON and mutated.
type PluginCall func(ctx context.Context, apiVersion, kind string, typ hooks.HookType, object string) (answer string, mutated bool, err error)

// VClusterMutator calls a plugin's Mutate the way vcluster does: it sends the JSON of its typed
// object (the *corev1.Pod decoded from obj), waiting CallTimeout, and when the answer says
// mutated it decodes the answer INTO that same object. The result is obj with the change the
// answer made to the typed object (Retyped).
func VClusterMutator(call PluginCall) Mutator {
	return func(t *testing.T, typ hooks.HookType, gvk schema.GroupVersionKind, obj []byte) ([]byte, error) {
		t.Helper()
		pod := Typed(t, gvk) // the typed object vcluster holds
		if err := json.Unmarshal(obj, pod); err != nil {
			t.Fatal(err)
		}
		sent, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), CallTimeout)
		defer cancel()
		apiVersion, kind := gvk.ToAPIVersionAndKind()
		answer, mutated, err := call(ctx, apiVersion, kind, typ, string(sent))
		if err != nil {
			return nil, err
		}
		if !mutated {
			if answer != "" {
				t.Errorf("mutated=false with an object")
			}
			return obj, nil
		}
		if err := json.Unmarshal([]byte(answer), pod); err != nil {
			t.Fatalf("decode the answer into the sent pod, as vcluster does: %v", err)
		}
		after, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		return Retyped(t, obj, sent, after), nil
	}
}
