package hookclient

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEncodeReviewIsJSONMarshal: splicing the object into the encoded envelope gives exactly
// the bytes json.Marshal gives, for object and for oldObject, whatever the names contain.
func TestEncodeReviewIsJSONMarshal(t *testing.T) {
	object := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"a":"\"object\":null"}}}`)
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Delete} {
		req := &admissionv1.AdmissionRequest{
			UID: "u", Operation: op, Namespace: `"object":null`, Name: `x","object":null`,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		}
		got, err := encodeReview(req, object)
		if err != nil {
			t.Fatal(err)
		}
		want := *req
		if op == admissionv1.Delete {
			want.OldObject.Raw = object
		} else {
			want.Object.Raw = object
		}
		wantJSON, _ := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  &want,
		})
		if string(got) != string(wantJSON) {
			t.Errorf("%s:\n got %s\nwant %s", op, got, wantJSON)
		}
	}
}
