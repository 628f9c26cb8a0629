package hooktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/internal/strictjson"
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
	if tree == nil { // an empty file: load says what it lacks
		return nil
	}
	top, ok := tree.(map[string]any)
	if !ok {
		return fmt.Errorf("%s, want a mapping of the test file's keys", strictjson.ShapeOf(tree))
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
	errs := unmarshalValue(top, f, "")
	for _, key := range []string{"cases", "namespaces"} {
		v, ok := lists[key]
		if !ok || v == nil {
			continue
		}
		entries, ok := v.([]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s, want a list", key, strictjson.ShapeOf(v)))
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
				errs = append(errs, unmarshalValue(e, &f.Cases[i], path)...)
			} else {
				errs = append(errs, unmarshalValue(e, &f.Namespaces[i], path)...)
			}
		}
	}
	return utilerrors.NewAggregate(errs)
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
			fields := strictjson.Fields(t)
			for k := range m {
				if ft, ok := fields[k]; ok {
					m[k] = stringify(m[k], ft)
				}
			}
		}
	}
	return v
}

// unmarshalValue is strictjson.Unmarshal of the decoded JSON value v.
func unmarshalValue(v, target any, path string) []error {
	j, err := json.Marshal(v)
	if err != nil {
		return []error{err}
	}
	return strictjson.Unmarshal(j, target, path)
}
