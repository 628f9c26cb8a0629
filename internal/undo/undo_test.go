package undo_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/undo"
)

var (
	pod = undo.Identity{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "web"}
	rec = undo.Record{Writers: []string{"0a1b2c3d"}, Entries: []undo.Entry{{Path: "/metadata/labels/team", Hooked: json.RawMessage(`"a"`)}}}
)

func ring(t *testing.T) *undo.Ring {
	t.Helper()
	r, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSealIsDeterministicAndOpensOnlyForItsObjectAndSide(t *testing.T) {
	r := ring(t)
	a, err := r.Seal(pod, undo.Physical, rec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := r.Seal(pod, undo.Physical, rec)
	if a != b || !undo.IsSealed(a) {
		t.Fatalf("two seals of the same record differ or are not sealed: %q %q", a, b)
	}
	got, id, err := r.Open(pod, undo.Physical, a)
	if err != nil || id != r.IDs()[0] || got.Entries[0].Path != rec.Entries[0].Path || got.Writers[0] != "0a1b2c3d" {
		t.Fatalf("Open = %+v, %q, %v", got, id, err)
	}
	other := pod
	other.Name = "web2"
	for what, open := range map[string]func() error{
		"another name":   func() error { _, _, err := r.Open(other, undo.Physical, a); return err },
		"the other side": func() error { _, _, err := r.Open(pod, undo.Virtual, a); return err },
		"another key":    func() error { _, _, err := ring(t).Open(pod, undo.Physical, a); return err },
		"a flipped byte": func() error {
			body := []byte(a)
			body[len(body)-3] ^= 1
			_, _, err := r.Open(pod, undo.Physical, string(body))
			return err
		},
	} {
		if err := open(); err == nil {
			t.Errorf("%s: opened", what)
		}
	}
	if _, _, err := r.Open(pod, undo.Physical, `[{"path":"/x"}]`); !errors.Is(err, undo.ErrNotSealed) {
		t.Errorf("clear text: %v, want ErrNotSealed", err)
	}
}

func TestAnOlderKeyStillOpensAfterARotationAndTheNewestSeals(t *testing.T) {
	old := ring(t)
	sealed, _ := old.Seal(pod, undo.Physical, rec)
	rotated, err := old.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if _, id, err := rotated.Open(pod, undo.Physical, sealed); err != nil || id != old.IDs()[0] {
		t.Fatalf("the old key's undo after rotation: %q %v", id, err)
	}
	fresh, _ := rotated.Seal(pod, undo.Physical, rec)
	if !strings.HasPrefix(fresh, "s2.n."+rotated.IDs()[1]+".") {
		t.Errorf("the newest key does not seal: %.20s", fresh)
	}
	text, _ := rotated.MarshalText()
	back, err := undo.ParseRing(text)
	if err != nil || !back.Contains(rotated) || !rotated.Contains(back) {
		t.Fatalf("ring text round trip: %v", err)
	}
}

func TestAnEntryKindThisBuildDoesNotKnowIsRefusedWhole(t *testing.T) {
	r := ring(t)
	newer := undo.Record{Entries: []undo.Entry{{Path: "/a"}, {Op: "arrayMove", Path: "/spec/tolerations/0"}}}
	if _, err := r.Seal(pod, undo.Physical, newer); !errors.Is(err, undo.ErrMalformed) {
		t.Errorf("Seal: %v, want ErrMalformed", err)
	}
}

func TestRingErrorsAndPrintsNeverShowASecret(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 63)))
	_, err := undo.ParseRing([]byte("k1 " + secret + "\n"))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("a 63-byte key: %v", err)
	}
	_, err = undo.ParseRing([]byte("k1 " + secret + " extra\n"))
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a bad line: %v", err)
	}
	r := ring(t)
	text, _ := r.MarshalText()
	line := strings.Fields(strings.Split(string(text), "\n")[1])[1]
	for _, s := range []string{fmt.Sprint(r), fmt.Sprintf("%v %+v %#v", r, r, r)} {
		if strings.Contains(s, line) || strings.Contains(s, line[:16]) {
			t.Errorf("a printed ring shows its secret: %s", s)
		}
	}
}

func TestKindText(t *testing.T) {
	for _, k := range []undo.Kind{
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Side: undo.Physical},
		{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Side: undo.Virtual},
	} {
		back, err := undo.ParseKind(k.String())
		if err != nil || back != k {
			t.Errorf("%s: %+v %v", k, back, err)
		}
	}
	for _, bad := range []string{"v1/Pod", "Pod physical", "v1/Pod sideways", "/Pod physical"} {
		if _, err := undo.ParseKind(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRestorableIsWhatAnUpdateCanChangeBack(t *testing.T) {
	podGVK := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	secretGVK := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	for _, c := range []struct {
		gvk    schema.GroupVersionKind
		tokens []string
		want   bool
	}{
		{podGVK, []string{"metadata", "labels", "team"}, true},
		{podGVK, []string{"metadata", "annotations"}, true},
		{podGVK, []string{"spec", "tolerations"}, false},
		{podGVK, []string{"spec", "nodeSelector", "pool"}, false},
		{secretGVK, []string{"data", "password"}, true},
		{secretGVK, []string{"type"}, false},
	} {
		if got := undo.Restorable(c.gvk, c.tokens); got != c.want {
			t.Errorf("Restorable(%s, %v) = %v", c.gvk.Kind, c.tokens, got)
		}
	}
}

// TestOpenRemembersOnlyWhatItWouldAnswerAgain: a sealed value opened once (remembered) still
// opens for no other object or side, a caller that changes the entries it got does not change
// the next answer, and a Secret's record opens the same each time.
func TestOpenRemembersOnlyWhatItWouldAnswerAgain(t *testing.T) {
	r, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	pod := undo.Identity{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "web"}
	secret := undo.Identity{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "creds"}
	rec := undo.Record{Writers: []string{"labels@1"}, Entries: []undo.Entry{{Path: "/metadata/labels/team", Hooked: []byte(`"a"`)}}}
	for _, id := range []undo.Identity{pod, secret} {
		value, err := r.Seal(id, undo.Physical, rec)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 { // the second and third opens are the remembered ones for the pod
			got, _, err := r.Open(id, undo.Physical, value)
			if err != nil || len(got.Entries) != 1 || got.Entries[0].Path != "/metadata/labels/team" {
				t.Fatalf("%s: Open = %+v, %v", id.Kind, got, err)
			}
			got.Entries[0].Path = "/spec" // the caller's copy
		}
		other := id
		other.Name = "other"
		if _, _, err := r.Open(other, undo.Physical, value); !errors.Is(err, undo.ErrUnauthentic) {
			t.Errorf("%s: the value opened once opens on another object: %v", id.Kind, err)
		}
		if _, _, err := r.Open(id, undo.Virtual, value); !errors.Is(err, undo.ErrUnauthentic) {
			t.Errorf("%s: the value opened once opens on the other side: %v", id.Kind, err)
		}
	}
}

// BenchmarkOpen is one Open of a labels-sized sealed value: a Pod's (remembered after the
// first) and a Secret's (never remembered: every Open decrypts).
func BenchmarkOpen(b *testing.B) {
	r, err := undo.GenerateRing()
	if err != nil {
		b.Fatal(err)
	}
	rec := undo.Record{Writers: []string{"labels@1"}, Entries: []undo.Entry{{Path: "/metadata/labels/team", Hooked: []byte(`"a"`)}}}
	for _, kind := range []string{"Pod", "Secret"} {
		id := undo.Identity{APIVersion: "v1", Kind: kind, Namespace: "ns", Name: "web"}
		value, err := r.Seal(id, undo.Physical, rec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := r.Open(id, undo.Physical, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestASealOpensOnlyWhereItsBindingFits(t *testing.T) {
	r := ring(t)
	rec := undo.Record{Entries: []undo.Entry{{Path: "/metadata/labels/a", Hooked: []byte(`"x"`)}}}
	named := undo.Identity{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "web"}
	withUID := named
	withUID.UID = "uid-1"
	recreated := named
	recreated.UID = "uid-2"
	nameless := undo.Identity{APIVersion: "v1", Kind: "Pod", Namespace: "ns", GenerateName: "web-"}
	named2 := nameless
	named2.Name = "web-abcde"
	other := nameless
	other.Name = "db-abcde"
	other.GenerateName = "web-"
	otherPrefix := named2
	otherPrefix.GenerateName = "db-"
	seal := func(id undo.Identity, side undo.Side) string {
		t.Helper()
		v, err := r.Seal(id, side, rec)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	fromObjectUID := withUID
	fromObjectUID.UIDSource = undo.UIDFromObjectUID
	legacyUID := undo.SealUnsourced(t, r, withUID, undo.Physical, rec)
	untimedName := undo.SealUntimed(t, r, named, undo.Virtual, rec)
	sealedAt := time.Now().Unix() // the seals above; the window is 30 s, the cases 5 min or 20 s off
	at := func(id undo.Identity, uid string, created int64) undo.Identity {
		id.UID, id.Created = uid, created
		return id
	}
	createdNow := at(named, "uid-1", sealedAt)
	createdSkewed := at(named, "uid-1", sealedAt-20)
	createdLater := at(named, "uid-2", sealedAt+300)
	createdEarlier := at(named, "uid-2", sealedAt-300)
	siblingLater := at(named2, "uid-3", sealedAt+300)
	cases := []struct {
		name    string
		value   string
		binding undo.Binding
		open    undo.Identity
		side    undo.Side
		opens   bool
	}{
		{"a seal with a uid opens on the object of that uid", seal(withUID, undo.Physical), undo.BindUID, withUID, undo.Physical, true},
		{"a seal with a uid does not open on a re-created object of the same name", seal(withUID, undo.Physical), undo.BindUID, recreated, undo.Physical, false},
		{"a seal with a uid does not open on an object without one", seal(withUID, undo.Physical), undo.BindUID, named, undo.Physical, false},
		{"a uid-less seal of a Create opens once the object has a uid", seal(named, undo.Virtual), undo.BindName, withUID, undo.Virtual, true},
		{"a nameless Create's seal opens on the object it names", seal(nameless, undo.Physical), undo.BindGenerateName, named2, undo.Physical, true},
		{"a nameless Create's seal does not open on a name without the prefix", seal(nameless, undo.Physical), undo.BindGenerateName, other, undo.Physical, false},
		{"a nameless Create's seal does not open under another generateName", seal(nameless, undo.Physical), undo.BindGenerateName, otherPrefix, undo.Physical, false},
		{"a nameless Create's seal does not open on the other side", seal(nameless, undo.Physical), undo.BindGenerateName, named2, undo.Virtual, false},
		// the uid's source (issue 43): vcluster's object-uid and metadata.uid are not one another
		{"a seal of metadata.uid does not open on an object-uid of that value", seal(withUID, undo.Physical), undo.BindUID, fromObjectUID, undo.Physical, false},
		{"a seal of an object-uid does not open on a metadata.uid of that value", seal(fromObjectUID, undo.Physical), undo.BindUID, withUID, undo.Physical, false},
		{"a seal of an object-uid opens on that object-uid", seal(fromObjectUID, undo.Physical), undo.BindUID, fromObjectUID, undo.Physical, true},
		{"a seal of a build before the source was bound opens on its uid", legacyUID, undo.BindUID, fromObjectUID, undo.Physical, true},
		// the time of a Create's seal against the object's creationTimestamp (issue 43)
		{"a name-bound seal opens on the object created by its Create", seal(named, undo.Virtual), undo.BindName, createdNow, undo.Virtual, true},
		{"a name-bound seal opens within the window either way", seal(named, undo.Virtual), undo.BindName, createdSkewed, undo.Virtual, true},
		{"a name-bound seal does not open on a re-created object of that name", seal(named, undo.Virtual), undo.BindName, createdLater, undo.Virtual, false},
		{"a name-bound seal does not open on an object created before it", seal(named, undo.Virtual), undo.BindName, createdEarlier, undo.Virtual, false},
		{"a generateName-bound seal does not open on a later sibling", seal(nameless, undo.Physical), undo.BindGenerateName, siblingLater, undo.Physical, false},
		{"a name-bound seal without a time (an earlier build's) does not open on a created object", untimedName, undo.BindName, createdNow, undo.Virtual, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if b, ok := undo.BindingOf(c.value); !ok || b != c.binding {
				t.Errorf("BindingOf = %q, %v; want %q", b, ok, c.binding)
			}
			_, _, err := r.Open(c.open, c.side, c.value)
			if c.opens && err != nil || !c.opens && !errors.Is(err, undo.ErrUnauthentic) {
				t.Errorf("Open: %v, want opens=%v", err, c.opens)
			}
		})
	}
}

func TestABindingLetterCannotBeSwapped(t *testing.T) {
	r := ring(t)
	rec := undo.Record{Entries: []undo.Entry{{Path: "/metadata/labels/a"}}}
	id := undo.Identity{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "web", UID: "u1"}
	v, err := r.Seal(id, undo.Physical, rec)
	if err != nil {
		t.Fatal(err)
	}
	swapped := "s2.n." + strings.TrimPrefix(v, "s2.u.")
	if _, _, err := r.Open(id, undo.Physical, swapped); !errors.Is(err, undo.ErrUnauthentic) {
		t.Errorf("a uid seal relabelled as uid-less: %v, want ErrUnauthentic", err)
	}
	if _, _, err := r.Open(id, undo.Physical, "s2.z."+strings.TrimPrefix(v, "s2.u.")); !errors.Is(err, undo.ErrMalformed) {
		t.Errorf("an unknown binding: %v, want ErrMalformed", err)
	}
}

// Rule.Opened (what `synchook test` shows of an undo) opens under the one rule, with its checks:
// the size bound, clear text, another object's seal and an entry on an identity path each give
// the reason, never entries.
func TestOpenedIsTheRulesView(t *testing.T) {
	r := ring(t)
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	object := func(value string) []byte {
		b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{
			"namespace": "ns", "name": "web", "uid": "u-1", "annotations": map[string]string{undo.Annotation: value},
		}})
		return b
	}
	id := pod
	id.UID, id.UIDSource = "u-1", undo.UIDFromMetadata
	sealed, err := r.Seal(id, undo.Physical, rec)
	if err != nil {
		t.Fatal(err)
	}
	identity, err := r.Seal(id, undo.Physical, undo.Record{Entries: []undo.Entry{{Path: "/metadata/name", Hooked: json.RawMessage(`"x"`)}}})
	if err != nil {
		t.Fatal(err)
	}
	other := id
	other.UID = "u-2"
	copied, _ := r.Seal(other, undo.Physical, rec)
	rule := undo.Rule{Ring: r, MaxBytes: undo.DefaultMaxBytes}
	if entries, had, err := rule.Opened(gvk, undo.Physical, object(sealed)); err != nil || !had || len(entries) != 1 || entries[0].Path != rec.Entries[0].Path {
		t.Fatalf("Opened of its own seal: %v, %v, %v", entries, had, err)
	}
	for name, c := range map[string]struct {
		rule  undo.Rule
		value string
		want  string
	}{
		"too large":        {undo.Rule{Ring: r, MaxBytes: len(sealed) - 1}, sealed, undo.ReasonTooLarge},
		"clear text":       {rule, `[{"path":"/metadata/labels/team"}]`, undo.ReasonClearText},
		"another's seal":   {rule, copied, undo.ReasonUnauthentic},
		"an identity path": {rule, identity, undo.ReasonIdentity},
		"no key":           {undo.Rule{MaxBytes: undo.DefaultMaxBytes}, sealed, undo.ReasonNoKey},
	} {
		entries, had, err := c.rule.Opened(gvk, undo.Physical, object(c.value))
		if err == nil || !had || entries != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Opened = %v, %v, %v; want no entries and an error naming %s", name, entries, had, err, c.want)
		}
	}
	if _, had, err := rule.Opened(gvk, undo.Physical, []byte(`{"metadata":{"name":"web"}}`)); had || err != nil {
		t.Errorf("no annotation: %v, %v", had, err)
	}
}
