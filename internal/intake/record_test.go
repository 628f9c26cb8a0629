package intake_test

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/jsonscan"
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
