// Package decode decodes a JSON object into a client.Object exactly as the Kubernetes JSON
// serializer does (kjson.UnmarshalCaseSensitivePreserveInts), faster where it can: in are the
// bytes and the object to fill, out the filled object or the serializer's error. It reads no
// request facts and runs no hook (that is the engine's typed path).
package decode

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
)

// Object unmarshals raw, a JSON object, into obj as the Kubernetes JSON serializer does
// (kjson.UnmarshalCaseSensitivePreserveInts). A typed object is decoded with encoding/json/v2
// (go-json-experiment) under encoding/json's rules, names case-sensitive (a Pod in two thirds
// of the time), except a type that reaches an interface value (kjson keeps integers there as
// int64) and anything v2 refuses, which kjson decodes. FuzzDecode holds the two to one result.
func Object(raw []byte, obj client.Object) error {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' { // null decodes into a struct as nothing
		return errors.New("the object is not a JSON object")
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		want := u.GroupVersionKind()
		if err := u.UnmarshalJSON(raw); err != nil {
			return err
		}
		if got := u.GroupVersionKind(); got != want {
			return fmt.Errorf("object is %s, want %s", got, want)
		}
		return nil
	}
	v := reflect.ValueOf(obj)
	if v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct && fastDecodes(v.Elem().Type()) {
		if jsonv2.Unmarshal(raw, obj, v1Rules) == nil {
			return nil
		}
		v.Elem().SetZero() // what v2 wrote before it stopped
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(raw, obj)
}

// v1Rules are encoding/json's decoding rules in the v2 decoder, with names matched
// case-sensitively, as kjson matches them.
var v1Rules = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.MatchCaseInsensitiveNames(false))

var fastTypes sync.Map // reflect.Type → bool

// fastDecodes reports whether values of type t are decoded with the v2 decoder: no value of an
// interface type is reachable from t other than inside a type that decodes itself
// (UnmarshalJSON, UnmarshalText), which both decoders call alike.
func fastDecodes(t reflect.Type) bool {
	if ok, seen := fastTypes.Load(t); seen {
		return ok.(bool)
	}
	ok := !reachesInterface(t, map[reflect.Type]bool{})
	fastTypes.Store(t, ok)
	return ok
}

var (
	jsonUnmarshaler = reflect.TypeFor[interface{ UnmarshalJSON([]byte) error }]()
	textUnmarshaler = reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()
)

// reachesInterface reports whether a value of type t can hold an interface value that the
// decoder fills (seen: the types already on the walk).
func reachesInterface(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	if pt := reflect.PointerTo(t); pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return reachesInterface(t.Elem(), seen)
	case reflect.Map:
		return reachesInterface(t.Key(), seen) || reachesInterface(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if reachesInterface(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}
