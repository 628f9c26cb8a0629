package engine_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
)

// legacyRing is the ring of testdata/s1 (values sealed by 41e4adb).
func legacyRing(t *testing.T) *undo.Keeper {
	t.Helper()
	text, err := os.ReadFile("testdata/s1/ring.txt")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := undo.ParseRing(text)
	if err != nil {
		t.Fatal(err)
	}
	return undo.NewKeeper(ring)
}

// legacyPod is team-a/web (uid u-web) as 41e4adb's labels hook left it: label team=a and the
// s1 value of testdata/s1/<side>.txt.
func legacyPod(t *testing.T, side string) []byte {
	t.Helper()
	value, err := os.ReadFile("testdata/s1/" + side + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"team-a","uid":"u-web",` +
		`"labels":{"app":"web","team":"a"},"annotations":{"synchook.io/undo":"` + string(value) + `"}},` +
		`"spec":{"containers":[{"name":"c","image":"nginx"}]}}`)
}

func TestAnS1UndoOfTheLastBuildOpensOnTheHostOnlyAndIsResealedWithTheUIDAtTheNextWrite(t *testing.T) {
	keys := legacyRing(t)
	reg := labelsRegistryOn(keys, "a", hooks.CreatePhysical, hooks.UpdatePhysical, hooks.CreateVirtual, hooks.UpdateVirtual)
	want := `{"app":"web"}`

	view := mutatedOK(t, reg, hooks.GetPhysical, legacyPod(t, "physical"))
	if got, _ := json.Marshal(decodePod(t, view).Labels); string(got) != want || strings.Contains(string(view), "synchook.io/") {
		t.Fatalf("the host read of an s1 undo: %s, want labels %s and no trace", view, want)
	}
	next := mutatedOK(t, reg, hooks.UpdatePhysical, view)
	sealed := decodePod(t, next).Annotations[undo.Annotation]
	if b, ok := undo.BindingOf(sealed); !ok || b != undo.BindUID {
		t.Fatalf("the next write sealed %.12q, want an s2 value bound to the uid", sealed)
	}
	if again := mutatedOK(t, reg, hooks.GetPhysical, next); string(canonical(t, again)) != string(canonical(t, view)) {
		t.Errorf("the read after the re-seal differs:\n%s\nwant\n%s", again, view)
	}

	// The virtual side never opens an s1 value: the tenant holds its virtual objects, and
	// an s1 seal is bound to no uid.
	stored := legacyPod(t, "virtual")
	if view := mutatedOK(t, reg, hooks.GetVirtual, stored); string(canonical(t, view)) != string(canonical(t, stored)) {
		t.Errorf("the virtual read applied an s1 undo: %s", view)
	}
}

func TestAHostSealIsBoundToVclustersObjectUID(t *testing.T) {
	reg := labelsRegistry(testKeeper(t), "a")
	sent := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-x-team-a-x-vc","namespace":"vc",` +
		`"annotations":{"vcluster.loft.sh/object-uid":"virtual-1"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`)
	created := mutatedOK(t, reg, hooks.CreatePhysical, sent)
	if b, _ := undo.BindingOf(decodePod(t, created).Annotations[undo.Annotation]); b != undo.BindUID {
		t.Fatalf("CreatePhysical with vcluster's object-uid sealed with binding %q, want the uid", b)
	}
	// The apiserver gives the host object its own uid; the seal still opens (object-uid).
	stored := []byte(strings.Replace(string(created), `"namespace":"vc"`, `"namespace":"vc","uid":"host-1"`, 1))
	if view := mutatedOK(t, reg, hooks.GetPhysical, stored); strings.Contains(string(view), "synchook.io/") || decodePod(t, view).Labels["team"] != "" {
		t.Errorf("the host read does not open the Create's seal: %s", view)
	}
	// A host object of the same name synced from another virtual object: dropped.
	other := []byte(strings.Replace(string(stored), `"virtual-1"`, `"virtual-2"`, 1))
	if view := mutatedOK(t, reg, hooks.GetPhysical, other); string(canonical(t, view)) != string(canonical(t, other)) {
		t.Errorf("the seal opened on a host object synced from another virtual object: %s", view)
	}
}

// What replaying an older seal of the same object can change (docs/guarantees.md): the seal
// opens (same identity and uid), and each entry applies only where the object still holds
// what that write's hooks wrote; so a replay can show, at a path the hooks still write, the
// value the syncer sent at that earlier write, and nothing else.
func TestReplayingAnOlderSealOfTheSameObjectChangesOnlyWhatItsHooksStillHold(t *testing.T) {
	keys := testKeeper(t)
	reg := labelsRegistry(keys, "a")
	withUID := func(labels map[string]string) []byte {
		return []byte(strings.Replace(string(podJSON(t, labels)), `"namespace":"ns"`, `"namespace":"ns","uid":"u1"`, 1))
	}
	first := mutatedOK(t, reg, hooks.UpdatePhysical, withUID(map[string]string{"app": "web", "team": "old"}))
	second := mutatedOK(t, reg, hooks.UpdatePhysical, withUID(map[string]string{"app": "api", "team": "new"}))
	older := decodePod(t, first).Annotations[undo.Annotation]

	p := decodePod(t, second)
	p.Annotations[undo.Annotation] = older
	replayed, _ := json.Marshal(p)
	view := decodePod(t, mutatedOK(t, reg, hooks.GetPhysical, replayed))
	if view.Labels["team"] != "old" {
		t.Errorf("team = %q: the replayed seal's entry applies where the object holds what its hooks wrote (a)", view.Labels["team"])
	}
	if view.Labels["app"] != "api" {
		t.Errorf("app = %q: a replayed seal changed a path its hooks did not write", view.Labels["app"])
	}
	// Where the object no longer holds what the old write's hooks wrote, nothing changes.
	p.Labels["team"] = "tenant"
	moved, _ := json.Marshal(p)
	if view := decodePod(t, mutatedOK(t, reg, hooks.GetPhysical, moved)); view.Labels["team"] != "tenant" {
		t.Errorf("team = %q: a replayed entry applied where the object holds another value", view.Labels["team"])
	}
}

// The idempotency check runs chains on sample objects, not objects of the cluster: it seals
// with a throwaway key and notes no kind as sealed on the registry's keeper (a noted kind is
// logged and stored in the key Secret, and its reads stay announced until cleanup).
func TestTheIdempotencyCheckNotesNoSealedKind(t *testing.T) {
	keys := testKeeper(t)
	reg := labelsRegistry(keys, "a")
	samples := func(schema.GroupVersionKind) [][]byte { return [][]byte{podJSON(t, map[string]string{"app": "web"})} }
	if err := reg.CheckIdempotent(t.Context(), samples); err != nil {
		t.Fatal(err)
	}
	if kinds := keys.SealedKinds(); len(kinds) != 0 {
		t.Errorf("the check noted %v as sealed", kinds)
	}
}
