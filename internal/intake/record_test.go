package intake_test

import (
	"bytes"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
)

// TestRecordAnnotationsAreWhatFindReads checks that Record.Annotations gives, for the request's
// own record (made by Shape.Check) and for a derived one, what jsonscan.Find reads in Meta's
// value, and that the own record's index holds them where the metadata has them (its lookup
// under them answering as a fresh index of the object).
func TestRecordAnnotationsAreWhatFindReads(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	for name, raw := range map[string]string{
		"annotations":                            `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","annotations":{"x":"1"}}}`,
		"no annotations":                         `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`,
		"null annotations":                       `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":null}}`,
		"annotations written with escapes":       `{"apiVersion":"v1","kind":"Pod","m\u0065tadata":{"ann\u006ftations":{"a\/b":"1"}}}`,
		"no metadata":                            `{"apiVersion":"v1","kind":"Pod"}`,
		"metadata that is no object":             `{"apiVersion":"v1","kind":"Pod","metadata":[]}`,
		"annotations after a repeated label map": `{"metadata":{"labels":{},"labels":{},"annotations":{"x":"1"}}}`,
		"metadata twice":                         `{"metadata":{"annotations":{"x":"1"}},"metadata":{"annotations":{"y":"2"}}}`,
	} {
		t.Run("an object with "+name+" has the annotations Find reads", func(t *testing.T) {
			b := []byte(raw)
			meta, _ := (&intake.Record{Raw: b}).Meta()
			want, _, _ := jsonscan.Find(meta, "annotations")
			records := map[string]*intake.Record{"derived": {Raw: b}}
			var own intake.Record
			if err := intake.ShapeOf(scheme.Scheme, gvk, false).Check(b, gvk, "object", "the request is for", &own); err == nil && own.Raw != nil {
				records["own"] = &own
			}
			for kind, rec := range records {
				if got := rec.Annotations(); !bytes.Equal(got, want.Value) {
					t.Errorf("%s record: Annotations() = %q, want %q", kind, got, want.Value)
				}
			}
			if records["own"] == nil {
				return
			}
			if own.IndexOf(b) != nil {
				t.Error("IndexOf(its own bytes) gives an index before a reader made one")
			}
			if x := own.Indexed(); own.IndexOf(b) != x {
				t.Fatal("IndexOf(its own bytes) is not the record's index")
			}
			if own.IndexOf(bytes.Clone(b)) != nil {
				t.Error("IndexOf(a copy of the bytes) gives an index")
			}
			for _, ptr := range []string{"/metadata/annotations", "/metadata/annotations/x", "/metadata/annotations/a~1b"} {
				got, gotOK := own.Indexed().LookupUnique(ptr)
				if want, wantOK := jsonscan.NewIndex(b).LookupUnique(ptr); gotOK != wantOK || !bytes.Equal(got, want) {
					t.Errorf("LookupUnique(%q) = %q, %v; a fresh index: %q, %v", ptr, got, gotOK, want, wantOK)
				}
			}
		})
	}
}

// TestRecordTopMemberIsWhatAnIndexLooksUp checks that Record.TopMember gives, for an own record
// and a derived one, what a jsonscan.Index of the object looks up at the member's pointer.
func TestRecordTopMemberIsWhatAnIndexLooksUp(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("Secret")
	for name, raw := range map[string]string{
		"immutable true":            `{"apiVersion":"v1","kind":"Secret","immutable":true,"data":{}}`,
		"no immutable":              `{"apiVersion":"v1","kind":"Secret","data":{}}`,
		"immutable written escaped": `{"apiVersion":"v1","kind":"Secret","imm\u0075table":false}`,
		"immutable twice":           `{"immutable":true,"immutable":false}`,
		"a key that has a slash":    `{"a/b":1}`,
		"no object":                 `[1]`,
	} {
		t.Run("an object with "+name+" gives the member the index looks up", func(t *testing.T) {
			b := []byte(raw)
			records := map[string]*intake.Record{"derived": {Raw: b}}
			var own intake.Record
			if err := intake.ShapeOf(scheme.Scheme, gvk, false).Check(b, gvk, "object", "the request is for", &own); err == nil && own.Raw != nil {
				records["own"] = &own
			}
			for _, key := range []string{"immutable", "a/b", "data"} {
				want, wantOK := jsonscan.NewIndex(b).Lookup("/" + string(jsonscan.AppendToken(nil, key)))
				for kind, rec := range records {
					if got, ok := rec.TopMember(key); ok != wantOK || !bytes.Equal(got, want) {
						t.Errorf("%s record: TopMember(%q) = %q, %v; the index: %q, %v", kind, key, got, ok, want, wantOK)
					}
				}
			}
		})
	}
}

// TestRecordMetaMembersAreWhatFindReads checks that an own record's MetaMembers are the
// members jsonscan.Find reads in its metadata, and that a derived record, or one without
// metadata, has none (undo.IdentityIn reads those).
func TestRecordMetaMembersAreWhatFindReads(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	for name, c := range map[string]struct {
		raw  string
		want bool
	}{
		"every member":            {`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","generateName":"a-","namespace":"n","uid":"u","creationTimestamp":"2026-01-02T03:04:05Z","annotations":{"vcluster.loft.sh/object-uid":"v"},"labels":{}}}`, true},
		"members written escaped": {`{"apiVersion":"v1","kind":"Pod","metadata":{"n\u0061me":"a","creationTim\u0065stamp":null}}`, true},
		"no members":              {`{"apiVersion":"v1","kind":"Pod","metadata":{}}`, true},
		"metadata that is null":   {`{"apiVersion":"v1","kind":"Pod","metadata":null}`, true},
		"no metadata":             {`{"apiVersion":"v1","kind":"Pod"}`, false},
	} {
		t.Run("an object with "+name+" has the members Find reads", func(t *testing.T) {
			b := []byte(c.raw)
			if _, ok := (&intake.Record{Raw: b}).MetaMembers(); ok {
				t.Error("a derived record has MetaMembers")
			}
			var own intake.Record
			if err := intake.ShapeOf(scheme.Scheme, gvk, false).Check(b, gvk, "object", "the request is for", &own); err != nil {
				t.Fatal(err)
			}
			got, ok := own.MetaMembers()
			if ok != c.want {
				t.Fatalf("MetaMembers ok = %v, want %v", ok, c.want)
			}
			meta, _ := own.Meta()
			find := func(key string) []byte { m, _, _ := jsonscan.Find(meta, key); return m.Value }
			want := undo.MetaMembers{Namespace: find("namespace"), Name: find("name"), GenerateName: find("generateName"), UID: find("uid"), CreationTimestamp: find("creationTimestamp"), Annotations: find("annotations")}
			if ok && !reflect.DeepEqual(got, want) {
				t.Errorf("MetaMembers = %q, Find reads %q", got, want)
			}
		})
	}
}
