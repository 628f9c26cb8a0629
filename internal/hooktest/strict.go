package hooktest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decodeFile decodes the YAML test file data into f strictly, the way package config decodes a
// config: YAML syntax and duplicate keys fail sigs.k8s.io/yaml's YAMLToJSONStrict; unknown keys
// (case-sensitive) and values of the wrong shape fail sigs.k8s.io/json's UnmarshalStrict, each
// error naming its key's path and, for an unknown key, the keys valid there:
// `cases[0]: unknown field "objct" (valid: expect, name, object, oldObject, type)`. The entries
// of cases and namespaces are decoded one by one, so that a value of the wrong shape names its
// entry too. A number or boolean where a string belongs is that string, as sigs.k8s.io/yaml's
// Unmarshal makes it (name: 1 is "1").
func decodeFile(data []byte, f *File) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return err
	}
	if tree == nil { // an empty file: Load says what it lacks
		return nil
	}
	top, ok := tree.(map[string]any)
	if !ok {
		return fmt.Errorf("%s, want a mapping of the test file's keys", shapeOf(tree))
	}
	stringify(top, reflect.TypeFor[File]())
	// the two lists of structs, entry by entry
	lists := map[string]any{}
	for _, key := range []string{"cases", "namespaces"} {
		if v, ok := top[key]; ok {
			lists[key] = v
			delete(top, key)
		}
	}
	errs := decodeStrict(top, f, "")
	for _, key := range []string{"cases", "namespaces"} {
		v, ok := lists[key]
		if !ok || v == nil {
			continue
		}
		entries, ok := v.([]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s, want a list", key, shapeOf(v)))
			continue
		}
		if key == "cases" {
			f.Cases = make([]Case, len(entries))
		} else {
			f.Namespaces = make([]corev1.Namespace, len(entries))
		}
		for i, e := range entries {
			path := fmt.Sprintf("%s[%d]", key, i)
			if key == "cases" {
				errs = append(errs, decodeStrict(e, &f.Cases[i], path)...)
			} else {
				errs = append(errs, decodeStrict(e, &f.Namespaces[i], path)...)
			}
		}
	}
	return utilerrors.NewAggregate(errs)
}

// strictOptions are the checks of the decode beyond the shapes of the values.
var strictOptions = []kjson.StrictOption{kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields}

// decodeStrict decodes the JSON value v into target (a pointer to a struct), which sits at path
// in the file, and returns the problems, each naming its place.
func decodeStrict(v, target any, path string) []error {
	j, err := json.Marshal(v)
	if err != nil {
		return []error{err}
	}
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
		if valid := keysAt(t, parent); what == "unknown field" && len(valid) > 0 {
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
	if ft := typeAt(t, field); ft != nil {
		want = kindWord(ft)
	}
	return field, value + ", want " + want
}

// shapeOf names the shape of the decoded JSON value v: "a list", "a mapping", …
func shapeOf(v any) string {
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

// kindWord names what the type t takes in YAML: "a string", "a list", "a mapping", …
func kindWord(t reflect.Type) string {
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

// rawMessage is the type of the keys a test file leaves as they are written (config, objects).
var rawMessage = reflect.TypeFor[json.RawMessage]()

// stringify turns, in the decoded JSON value v, every number and boolean where the type t
// (walked along v) holds a string into that string, and returns v.
func stringify(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage {
		return v
	}
	switch t.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case json.Number:
			return x.String()
		case bool:
			return strconv.FormatBool(x)
		}
	case reflect.Slice, reflect.Array:
		if l, ok := v.([]any); ok {
			for i := range l {
				l[i] = stringify(l[i], t.Elem())
			}
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				m[k] = stringify(m[k], t.Elem())
			}
		}
	case reflect.Struct:
		if m, ok := v.(map[string]any); ok {
			fields := jsonFields(t)
			for k := range m {
				if ft, ok := fields[k]; ok {
					m[k] = stringify(m[k], ft)
				}
			}
		}
	}
	return v
}

// typeAt returns the type of the value at the dotted path below the type t ("", "expect",
// "metadata.labels"; list indexes ignored), nil when the path leads nowhere.
func typeAt(t reflect.Type, path string) reflect.Type {
	for seg := range strings.SplitSeq(path, ".") {
		if seg == "" {
			continue
		}
		seg, _, _ = strings.Cut(seg, "[")
		ft, ok := jsonFields(t)[seg]
		if !ok {
			return nil
		}
		t = ft
	}
	return t
}

// keysAt returns the keys that the type t accepts at the dotted path below it, sorted; nil when
// the path leads to no struct. sigs.k8s.io/json reports an unknown key but not the valid ones.
// (config.keysAt does the same for a config.)
func keysAt(t reflect.Type, path string) []string {
	at := typeAt(t, path)
	if at == nil {
		return nil
	}
	fields := jsonFields(at)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonFields maps the JSON keys of the struct type t (behind pointers and slices) to the types
// of their values; nil when t is no struct. The fields of an embedded struct without a JSON
// name are its own, as encoding/json has them (a Namespace's TypeMeta).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if inner := jsonFields(f.Type); f.Anonymous && name == "" && inner != nil {
			for k, ft := range inner {
				if _, shadowed := fields[k]; !shadowed {
					fields[k] = ft
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}
