// Package hoststore is a model, in process, of what a kube-apiserver's storage does to an
// object's JSON: the object a syncer reads back is the one the host stored, not the one a
// write chain answered. A built-in kind is decoded into its k8s.io/api Go type and encoded
// again, as the apiserver's storage round trip does, so that
//
//   - an empty map or list of an omitempty field is gone (Secret and ConfigMap data: {},
//     metadata.labels: {}, spec.tolerations: [], spec.nodeSelector: {}),
//   - a field the type does not have is gone (the apiserver prunes unknown fields),
//   - numbers, quantities and times take their canonical form;
//
// a kind the scheme does not know (a custom resource, stored as JSON) is kept as it is.
//
// It deliberately does not apply defaults (the scheme's defaulters, DefaultTolerationSeconds)
// or admission: those live in k8s.io/kubernetes, which the main module does not import. The
// truth it is checked against is a real kube-apiserver (e2e's storage oracle, envtest), which
// does all three; this model is what offline checks (`synchook test`'s round trip, the fuzz
// targets) run through.
package hoststore

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
)

// Store returns raw, a JSON object of kind gvk, as a kube-apiserver stores it (see the
// package comment). Errors: raw is not a JSON object, or does not decode into gvk's Go type
// (the apiserver refuses such an object: 400).
func Store(gvk schema.GroupVersionKind, raw []byte) ([]byte, error) {
	return StoreWith(clientgoscheme.Scheme, gvk, raw)
}

// StoreWith is Store with the kinds of scheme as the built-in ones.
func StoreWith(scheme *runtime.Scheme, gvk schema.GroupVersionKind, raw []byte) ([]byte, error) {
	obj, err := scheme.New(gvk)
	if err != nil { // not a built-in kind: stored as JSON
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("store %s: not a JSON object: %w", gvk.Kind, err)
		}
		return json.Marshal(v)
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
		return nil, fmt.Errorf("store %s: %w", gvk.Kind, err)
	}
	return json.Marshal(obj)
}

// Created returns raw, a JSON object, with metadata.creationTimestamp set to at (whole seconds,
// UTC, RFC 3339) as a kube-apiserver stores a Create: it replaces whatever the request carried
// (vcluster sends none; a client may send any). A read of a Create's object sees that time,
// which bounds where a Create's name-bound undo opens (undo.NameBindWindow). raw as it is when
// it is not a JSON object (or its metadata not one).
func Created(raw []byte, at time.Time) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw
	}
	var meta map[string]json.RawMessage
	if m, ok := obj["metadata"]; ok && (json.Unmarshal(m, &meta) != nil || meta == nil) {
		return raw
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	ts, _ := json.Marshal(at.UTC().Truncate(time.Second).Format(time.RFC3339))
	meta["creationTimestamp"] = ts
	var err error
	if obj["metadata"], err = json.Marshal(meta); err != nil {
		return raw
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return out
}
