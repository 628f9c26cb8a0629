package undo_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
)

func TestIdentityInReadsTheMetadataOnce(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	labels := `"labels":{"a":"b","vcluster.loft.sh/object-uid":"not-an-annotation"}`
	base := undo.Identity{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "web", UID: "m-uid", UIDSource: undo.UIDFromMetadata, Created: 1790000000}
	withUID := func(id undo.Identity, uid string, src undo.UIDSource) undo.Identity {
		id.UID, id.UIDSource = uid, src
		return id
	}
	for _, tc := range []struct {
		name string
		side undo.Side
		meta string
		want undo.Identity
	}{
		{
			name: "the physical side takes vcluster's object-uid annotation",
			side: undo.Physical,
			meta: `{"name":"web",` + labels + `,"annotations":{"x":"1","vcluster.loft.sh/object-uid":"v-uid","y":"2"},"namespace":"ns","uid":"m-uid","creationTimestamp":"2026-09-21T14:13:20Z"}`,
			want: withUID(base, "v-uid", undo.UIDFromObjectUID),
		},
		{
			name: "the virtual side takes metadata.uid",
			side: undo.Virtual,
			meta: `{"name":"web","annotations":{"vcluster.loft.sh/object-uid":"v-uid"},"namespace":"ns","uid":"m-uid","creationTimestamp":"2026-09-21T14:13:20Z"}`,
			want: base,
		},
		{
			name: "an escaped annotation key is the same key",
			side: undo.Physical,
			meta: `{"annotations":{"vcluster.loft.sh\/object-uid":"v-uid"},"uid":"m-uid","name":"web","namespace":"ns","creationTimestamp":"2026-09-21T14:13:20Z"}`,
			want: withUID(base, "v-uid", undo.UIDFromObjectUID),
		},
		{
			name: "the last of a repeated annotation key counts",
			side: undo.Physical,
			meta: `{"annotations":{"vcluster.loft.sh/object-uid":"first","vcluster.loft.sh/object-uid":"last"},"uid":"m-uid","name":"web","namespace":"ns","creationTimestamp":"2026-09-21T14:13:20Z"}`,
			want: withUID(base, "last", undo.UIDFromObjectUID),
		},
		{
			name: "a later annotations member without the key leaves the one found",
			side: undo.Physical,
			meta: `{"annotations":{"vcluster.loft.sh/object-uid":"v-uid"},"annotations":{"x":"1"},"uid":"m-uid","name":"web","namespace":"ns","creationTimestamp":"2026-09-21T14:13:20Z"}`,
			want: withUID(base, "v-uid", undo.UIDFromObjectUID),
		},
		{
			name: "null annotations and members after them",
			side: undo.Physical,
			meta: `{"annotations":null,"uid":"m-uid","name":"web","namespace":"ns","creationTimestamp":"2026-09-21T14:13:20Z"}`,
			want: base,
		},
		{
			name: "a generateName and no uid or time",
			side: undo.Physical,
			meta: `{"generateName":"web-","namespace":"ns","annotations":{}}`,
			want: undo.Identity{APIVersion: "v1", Kind: "Pod", Namespace: "ns", GenerateName: "web-", UIDSource: undo.UIDFromMetadata},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := undo.IdentityIn(gvk, tc.side, []byte(tc.meta)); got != tc.want {
				t.Errorf("IdentityIn = %+v, want %+v", got, tc.want)
			}
		})
	}
	if got, want := undo.IdentityIn(gvk, undo.Physical, nil), (undo.Identity{APIVersion: "v1", Kind: "Pod"}); got != want {
		t.Errorf("IdentityIn of no metadata = %+v, want %+v", got, want)
	}
}

// BenchmarkIdentityIn reads the Identity of the ~5 KiB benchmark Pod's metadata (ten labels,
// ten annotations, an owner reference), as a write's seal and a read's plan do.
func BenchmarkIdentityIn(b *testing.B) {
	meta, _, _ := jsonscan.Find(fixtures.JSON(fixtures.Pod("ns", "web")), "metadata")
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	b.ReportAllocs()
	for b.Loop() {
		if id := undo.IdentityIn(gvk, undo.Physical, meta.Value); id.Name != "web" {
			b.Fatal(id)
		}
	}
}

// FuzzMetaMembersIdentity checks that the Identity of a metadata object's members as a scan
// read them (MetaMembers, each key once: the intake's check refuses a repeated one) is
// IdentityIn of the object, on both sides.
func FuzzMetaMembersIdentity(f *testing.F) {
	meta, _, _ := jsonscan.Find(fixtures.JSON(fixtures.Pod("ns", "web")), "metadata")
	f.Add(meta.Value)
	f.Add([]byte(`{"name":"a","uid":"u","annotations":{"vcluster.loft.sh/object-uid":"v","vcluster.loft.sh/object-uid":"w"}}`))
	f.Add([]byte(`{"n\u0061me":"a","creationTimestamp":"2026-01-02T03:04:05Z","annotations":{"vcluster.loft.sh\/object-uid":"v"}}`))
	f.Add([]byte(`{"generateName":"g-","namespace":1,"annotations":null,"creationTimestamp":"yesterday"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"annotations":[],"uid":null}`))
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	f.Fuzz(func(t *testing.T, meta []byte) {
		if !jsonscan.Valid(meta) {
			t.Skip() // read after the request was found valid
		}
		var mm undo.MetaMembers
		for _, m := range []struct {
			key  string
			into *[]byte
		}{{"namespace", &mm.Namespace}, {"name", &mm.Name}, {"generateName", &mm.GenerateName}, {"uid", &mm.UID}, {"creationTimestamp", &mm.CreationTimestamp}, {"annotations", &mm.Annotations}} {
			v, count, _ := jsonscan.Find(meta, m.key)
			if count > 1 {
				t.Skip() // refused by the intake
			}
			*m.into = v.Value
		}
		for _, side := range []undo.Side{undo.Physical, undo.Virtual} {
			if got, want := mm.Identity(gvk, side), undo.IdentityIn(gvk, side, meta); got != want {
				t.Fatalf("%s, side %v: MetaMembers.Identity = %+v, IdentityIn = %+v", meta, side, got, want)
			}
		}
	})
}

// BenchmarkMetaMembersIdentity is BenchmarkIdentityIn from the members a scan read already (the
// intake's check, as the engine's identityOf takes them): only the annotations are read.
func BenchmarkMetaMembersIdentity(b *testing.B) {
	meta, _, _ := jsonscan.Find(fixtures.JSON(fixtures.Pod("ns", "web")), "metadata")
	find := func(key string) []byte { m, _, _ := jsonscan.Find(meta.Value, key); return m.Value }
	mm := undo.MetaMembers{Namespace: find("namespace"), Name: find("name"), UID: find("uid"), CreationTimestamp: find("creationTimestamp"), Annotations: find("annotations")}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	b.ReportAllocs()
	for b.Loop() {
		if id := mm.Identity(gvk, undo.Physical); id.Name != "web" {
			b.Fatal(id)
		}
	}
}
