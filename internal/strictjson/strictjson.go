// Package strictjson decodes JSON into Go structs as synchook's YAML files are read (the
// config, synchook test's test files): strictly, with every problem named by its place in the
// document and, for an unknown key, the keys valid there. It is the one place that turns
// sigs.k8s.io/json's strict errors into such messages; YAML is turned into JSON by the caller
// (sigs.k8s.io/yaml's YAMLToJSONStrict).
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/synchook/synchook/internal/jsonfield"
	kjson "sigs.k8s.io/json"
)

// strictOptions are the checks of the decode beyond the shapes of the values.
var strictOptions = []kjson.StrictOption{kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields}

// Unmarshal decodes the JSON j strictly into target (a pointer to a struct), which sits at path
// in its document ("", "hooks[1]", "cases[0]"), and returns the problems, each naming its
// place: an unknown key with the keys valid there (`cases[0]: unknown field "objct" (valid:
// expect, name, object, oldObject, type)`), a duplicate key, or a value of the wrong shape
// (`cases[1].name: a list, want a string`). Keys are case-sensitive, as in the Kubernetes API.
func Unmarshal(j []byte, target any, path string) []error {
	at := func(where, msg string) error {
		if where = strings.Trim(where, "."); where != "" {
			return fmt.Errorf("%s: %s", where, msg)
		}
		return errors.New(msg)
	}
	t := reflect.TypeOf(target)
	strictErrs, err := kjson.UnmarshalStrict(j, target, strictOptions...)
	if err != nil {
		field, msg := typeError(err.Error(), t)
		return []error{at(path+"."+field, msg)}
	}
	errs := make([]error, 0, len(strictErrs))
	for _, e := range strictErrs {
		var fe kjson.FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, at(path, e.Error()))
			continue
		}
		// sigs.k8s.io/json says `unknown field "expect.mach"`; name the key at its parent.
		key := fe.FieldPath()
		what := strings.TrimSuffix(e.Error(), " "+strconv.Quote(key)) // "unknown field" or "duplicate field"
		parent := ""
		if i := strings.LastIndexByte(key, '.'); i >= 0 {
			parent, key = key[:i], key[i+1:]
		}
		msg := fmt.Sprintf("%s %q", what, key)
		if valid := KeysAt(t, parent); what == "unknown field" && len(valid) > 0 {
			msg += " (valid: " + strings.Join(valid, ", ") + ")"
		}
		errs = append(errs, at(path+"."+parent, msg))
	}
	return errs
}

// typeErrorText is encoding/json's UnmarshalTypeError as sigs.k8s.io/json words it: the value,
// the innermost struct and the dotted path of the field below the decoded value, or the type.
var typeErrorText = regexp.MustCompile(`^json: cannot unmarshal (.+) into Go (?:struct field [^.]*\.(\S+)|value) of type (\S+)$`)

// typeError returns the field path and the message of the decode error text of a value of the
// wrong shape below the type t: "name", "a list, want a string"; else "" and the text.
func typeError(text string, t reflect.Type) (field, msg string) {
	m := typeErrorText.FindStringSubmatch(text)
	if m == nil {
		return "", strings.TrimPrefix(text, "json: ")
	}
	value, field := m[1], m[2]
	switch value {
	case "array":
		value = "a list"
	case "object":
		value = "a mapping"
	case "bool":
		value = "true or false"
	default: // "string", "number", "number 1.5"
		value = "a " + value
	}
	want := "a " + m[3]
	if ft := TypeAt(t, field); ft != nil {
		if ft.String() != m[3] && (ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice) {
			// the value is an element of the map or list at field (labels: {a: [x]})
			ft = ft.Elem()
		}
		want = KindWord(ft)
	}
	return field, value + ", want " + want
}

// ShapeOf names the shape of the decoded JSON value v: "a list", "a mapping", …
func ShapeOf(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "true or false"
	}
	return "nothing"
}

// KindWord names what the type t takes in YAML: "a string", "a list", "a mapping", …
func KindWord(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.String()
}

// TypeAt returns the type of the value at the dotted path below the type t ("", "expect",
// "metadata.labels"; list indexes ignored), nil when the path leads nowhere.
func TypeAt(t reflect.Type, path string) reflect.Type {
	for seg := range strings.SplitSeq(path, ".") {
		if seg == "" {
			continue
		}
		seg, _, _ = strings.Cut(seg, "[")
		ft, ok := Fields(t)[seg]
		if !ok {
			return nil
		}
		t = ft
	}
	return t
}

// KeysAt returns the keys that the type t accepts at the dotted path below it, sorted; nil when
// the path leads to no struct. sigs.k8s.io/json reports an unknown key but not the valid ones.
func KeysAt(t reflect.Type, path string) []string {
	at := TypeAt(t, path)
	if at == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(Fields(at)))
}

// Fields maps the JSON keys of the struct type t (behind pointers and slices) to the types
// of their values; nil when t is no struct. The fields of an embedded struct without a JSON
// name are its own, as encoding/json has them (a Namespace's TypeMeta): jsonfield.Of's.
func Fields(t reflect.Type) map[string]reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	for _, f := range jsonfield.Of(t) {
		fields[f.Name] = f.Type
	}
	return fields
}
