package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
)

// Parse decodes the YAML config in data strictly and validates it (Validate). Unknown keys
// (compared case-sensitively), duplicate keys and values of the wrong shape are errors that
// name where they are, e.g. `hooks[1]: unknown field "labls"`. Entries without a name get
// their default name. Every error wraps ErrInvalid; several are joined with errors.Join.
func Parse(data []byte) (*Config, error) {
	c, err := decode(data)
	if err != nil {
		return nil, err
	}
	for i := range c.Hooks {
		c.Hooks[i].Name = c.Hooks[i].name(i)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// fileConfig is the shape of the YAML document. It differs from Config only in that hook types
// are plain strings, so that an unknown one is reported by Validate with its position instead
// of failing the decode.
type fileConfig struct {
	Hooks []fileHook `json:"hooks"`
}

// fileHook is Hook with plain string types. It repeats Hook's fields rather than embedding
// Hook because sigs.k8s.io/yaml does not look into embedded structs when it decides which YAML
// scalars to turn into strings; TestFileHookMatchesHook keeps the two in step.
type fileHook struct {
	Name           string                `json:"name,omitempty"`
	Resources      []Resource            `json:"resources"`
	Types          []string              `json:"types"`
	Namespaces     []string              `json:"namespaces,omitempty"`
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
	Labels         *builtin.Labels       `json:"labels,omitempty"`
	Strip          *builtin.Strip        `json:"strip,omitempty"`
}

// hook returns fh as a Hook, keeping "types: []" apart from a missing types key.
func (fh *fileHook) hook() Hook {
	h := Hook{
		Name:           fh.Name,
		Resources:      fh.Resources,
		Namespaces:     fh.Namespaces,
		ObjectSelector: fh.ObjectSelector,
		Labels:         fh.Labels,
		Strip:          fh.Strip,
	}
	if fh.Types != nil {
		h.Types = make([]hooks.HookType, len(fh.Types))
		for i, t := range fh.Types {
			h.Types[i] = hooks.HookType(t)
		}
	}
	return h
}

// decode turns data into a Config without validating it.
//
// The values come from sigs.k8s.io/yaml's UnmarshalStrict, which converts YAML scalars to
// strings where the config wants strings (as kubectl does: sync: yes becomes "true"). Its
// errors do not say where a key is, and its key matching ignores case, so a second pass decodes
// the same document with sigs.k8s.io/json (case-sensitive, collects every unknown key with its
// path) to report unknown keys and values of the wrong shape with their position.
func decode(data []byte) (*Config, error) {
	var fc fileConfig
	decodeErr := yaml.UnmarshalStrict(data, &fc)
	if errs := locateErrors(data); len(errs) > 0 {
		return nil, invalid(errs)
	}
	if decodeErr != nil {
		return nil, invalid([]error{cleanDecodeError(decodeErr)})
	}
	c := &Config{Hooks: make([]Hook, len(fc.Hooks))}
	for i := range fc.Hooks {
		c.Hooks[i] = fc.Hooks[i].hook()
	}
	return c, nil
}

// locateErrors returns the unknown keys and the values of the wrong shape in data, each
// naming its position; nil when there are none or data is not YAML (decode reports that).
func locateErrors(data []byte) []error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil
	}
	// Every leaf of the config is a string: make every scalar one, so that only keys and
	// shapes (list, mapping, scalar) can fail below.
	tree = stringifyScalars(tree)
	j, err = json.Marshal(tree)
	if err != nil {
		return nil
	}
	strictErrs, err := kjson.UnmarshalStrict(j, &fileConfig{}, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err != nil {
		if located := locateShapeError(tree); located != nil {
			return []error{located}
		}
		return nil
	}
	errs := make([]error, 0, len(strictErrs))
	for _, e := range strictErrs {
		errs = append(errs, fieldError(e))
	}
	return errs
}

// stringifyScalars returns v with every number and boolean replaced by its text.
func stringifyScalars(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = stringifyScalars(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = stringifyScalars(e)
		}
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	default:
		return v
	}
}

// fieldError rewrites a strict error of sigs.k8s.io/json (`unknown field "hooks[1].labls"`)
// as `hooks[1]: unknown field "labls" (valid: …)`.
func fieldError(err error) error {
	var fe kjson.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	path := fe.FieldPath()
	what := strings.TrimSuffix(err.Error(), " "+strconv.Quote(path)) // "unknown field" or "duplicate field"
	parent, key := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, key = path[:i], path[i+1:]
	}
	msg := fmt.Sprintf("%s %q", what, key)
	if what == "unknown field" {
		if valid := fieldsAt(parent); len(valid) > 0 {
			msg += " (valid: " + strings.Join(valid, ", ") + ")"
		}
	}
	if parent == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %s", parent, msg)
}

// fieldsAt returns the keys the config accepts at path (e.g. "hooks[1].labels"), or nil when
// path does not lead to a struct.
func fieldsAt(path string) []string {
	t := reflect.TypeFor[fileConfig]()
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			continue
		}
		if i := strings.IndexByte(seg, '['); i >= 0 {
			seg = seg[:i]
		}
		f, ok := jsonFields(t)[seg]
		if !ok {
			return nil
		}
		t = f
	}
	fields := jsonFields(t)
	if fields == nil {
		return nil
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// jsonFields maps the JSON keys of struct type t (behind pointers and slices) to the types of
// their values, with elements of slices and pointers resolved; nil when t is no struct.
// Untagged embedded structs are flattened, and an outer field hides an embedded one.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	t = elem(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			embedded = append(embedded, f.Type)
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fields[name] = elem(f.Type)
	}
	for _, e := range embedded {
		for name, ft := range jsonFields(e) {
			if _, hidden := fields[name]; !hidden {
				fields[name] = ft
			}
		}
	}
	return fields
}

// elem strips pointers and slices off t.
func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

// locateShapeError finds the first value of the wrong shape in tree (a list where a mapping
// belongs, …) and returns an error naming its position, or nil.
func locateShapeError(tree any) error {
	var top struct {
		Hooks []json.RawMessage `json:"hooks"`
	}
	b, err := json.Marshal(tree)
	if err != nil {
		return nil
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return shapeError("", err)
	}
	for i, raw := range top.Hooks {
		if err := json.Unmarshal(raw, &fileHook{}); err != nil {
			return shapeError(fmt.Sprintf("hooks[%d]", i), err)
		}
	}
	return nil
}

// shapeError describes a *json.UnmarshalTypeError at prefix in YAML words.
func shapeError(prefix string, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return nil
	}
	path := prefix
	if te.Field != "" {
		if path != "" {
			path += "."
		}
		path += te.Field
	}
	if path == "" {
		path = "config"
	}
	return fmt.Errorf("%s: want %s, got %s", path, yamlKind(te.Type), yamlValue(te.Value))
}

// yamlKind names what a Go type looks like in YAML.
func yamlKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Pointer:
		return yamlKind(t.Elem())
	default:
		return "a " + t.Kind().String()
	}
}

// yamlValue names a JSON value kind (as in json.UnmarshalTypeError.Value) in YAML words.
func yamlValue(v string) string {
	switch v {
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	case "string":
		return "a string"
	default:
		return v
	}
}

// cleanDecodeError drops the layers of wrapping that sigs.k8s.io/yaml puts around decode
// errors, which say nothing to someone editing the config.
func cleanDecodeError(err error) error {
	msg := err.Error()
	for _, prefix := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return errors.New(msg)
}

// invalid wraps errs with ErrInvalid: nil for none, "invalid synchook config: <err>" for one,
// and the errors joined one per line for several.
func invalid(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: %w", ErrInvalid, errs[0])
	default:
		return fmt.Errorf("%w (%d errors):\n%w", ErrInvalid, len(errs), errors.Join(errs...))
	}
}
