package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/strictjson"
)

// Parse decodes the YAML config in data strictly and validates it (Validate). Unknown keys
// (compared case-sensitively), duplicate keys and values of the wrong shape are errors that
// name where they are, e.g. `hooks[1]: unknown field "labls" (valid: …)`. Entries without a
// name get their default name. Every error wraps ErrInvalid. The config is given inline: it has
// no directory, so a relative policyFile is an error (give an absolute path); a config read
// from a file is read with Load, which takes relative files relative to it.
func Parse(data []byte) (*Config, error) { return parse(data, Source{}, nil) }

// parse is Parse of a config that came from src, whose relative files resolve as src says
// (Source.resolve) and are read with read (nil: by the policy compiler, os.ReadFile).
func parse(data []byte, src Source, read func(string) ([]byte, error)) (*Config, error) {
	c, err := decode(data)
	if err != nil {
		return nil, err
	}
	c.source, c.readFile = src, read
	for i := range c.Hooks {
		c.Hooks[i].Name = c.Hooks[i].name(i)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// document is the shape of the YAML document. Its entries are decoded one by one, so that an
// error says which entry it is about.
type document struct {
	Provenance *bool             `json:"provenance,omitempty"`
	Hooks      []json.RawMessage `json:"hooks"`
	Settings   json.RawMessage   `json:"settings,omitempty"`
}

// hookEntry is the shape of an entry of hooks: Hook with plain string types, so that an unknown
// one is reported by Validate with its position instead of failing the decode. It repeats
// Hook's fields rather than embedding Hook, whose Go name would show in the decode's errors
// ("Go struct field Labels.Hook.labels.labels"); TestHookEntryMatchesHook keeps the two in step.
type hookEntry struct {
	Name           string                `json:"name,omitempty"`
	Resources      []Resource            `json:"resources"`
	Types          []string              `json:"types"`
	Namespaces     []string              `json:"namespaces,omitempty"`
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
	Labels         *builtin.Labels       `json:"labels,omitempty"`
	Strip          *builtin.Strip        `json:"strip,omitempty"`
	Image          *builtin.Image        `json:"image,omitempty"`
	Undo           *bool                 `json:"undo,omitempty"`
	Policy         *json.RawMessage      `json:"policy,omitempty"`
	PolicyFile     string                `json:"policyFile,omitempty"`
	Bindings       []json.RawMessage     `json:"bindings,omitempty"`
	Params         []json.RawMessage     `json:"params,omitempty"`
	BindingsFile   string                `json:"bindingsFile,omitempty"`
	ParamsFile     string                `json:"paramsFile,omitempty"`
	HostParams     *HostParams           `json:"hostParams,omitempty"`
}

// hook returns e as a Hook, keeping "types: []" apart from a missing types key.
func (e *hookEntry) hook() Hook {
	h := Hook{
		Name:           e.Name,
		Resources:      e.Resources,
		Namespaces:     e.Namespaces,
		ObjectSelector: e.ObjectSelector,
		Labels:         e.Labels,
		Strip:          e.Strip,
		Image:          e.Image,
		Undo:           e.Undo,
		Policy:         e.Policy,
		PolicyFile:     e.PolicyFile,
		Bindings:       e.Bindings,
		Params:         e.Params,
		BindingsFile:   e.BindingsFile,
		ParamsFile:     e.ParamsFile,
		HostParams:     e.HostParams,
	}
	if e.Types != nil {
		h.Types = make([]hooks.HookType, len(e.Types))
		for i, t := range e.Types {
			h.Types[i] = hooks.HookType(t)
		}
	}
	return h
}

// decode turns data into a Config without validating it, in one strict pass: YAML syntax and
// duplicate keys fail sigs.k8s.io/yaml's YAMLToJSONStrict, unknown keys (case-sensitive, as in
// the Kubernetes API) and values of the wrong shape fail sigs.k8s.io/json's UnmarshalStrict,
// which reports every unknown key with its path. All errors of all entries are returned.
func decode(data []byte) (*Config, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, invalid(utilerrors.NewAggregate([]error{err}))
	}
	if j, err = stringifyScalars(j); err != nil {
		return nil, invalid(utilerrors.NewAggregate([]error{err}))
	}
	var doc document
	if errs := unmarshal(j, &doc, ""); len(errs) > 0 {
		return nil, invalid(utilerrors.NewAggregate(errs))
	}
	c := &Config{Hooks: make([]Hook, len(doc.Hooks)), Provenance: doc.Provenance != nil && *doc.Provenance, Settings: settings(doc.Settings)}
	var errs []error
	for i, raw := range doc.Hooks {
		var e hookEntry
		if es := unmarshal(raw, &e, fmt.Sprintf("hooks[%d]", i)); len(es) > 0 {
			errs = append(errs, es...)
			continue
		}
		c.Hooks[i] = e.hook()
	}
	if len(errs) > 0 {
		return nil, invalid(utilerrors.NewAggregate(errs))
	}
	return c, nil
}

// unmarshal decodes the JSON j strictly into v, which sits at path in the document, and
// returns the problems, each naming its place: `hooks[1]: unknown field "labls" (valid: …)`
// (strictjson.Unmarshal).
func unmarshal(j []byte, v any, path string) []error { return strictjson.Unmarshal(j, v, path) }

// stringifyScalars returns the JSON j with every number and boolean turned into a string,
// except the booleans of a hook entry's own fields (undo). Every other leaf of the config is a
// string, and YAML scalars such as yes, 2 or 1.5 are meant as strings there (sync: yes is
// "true", as sigs.k8s.io/yaml's Unmarshal makes it for a string field), while shapes (list,
// mapping, scalar) are left for the decode to check.
func stringifyScalars(j []byte) ([]byte, error) {
	var tree any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	var walk func(v any, entry bool) any // entry: v is a member of a hook entry
	walk = func(v any, entry bool) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if _, isBool := e.(bool); entry && (isBool && k == "undo" || k == "policy") {
					continue // a boolean field, or a policy: the policy package decodes it as it is
				}
				v[k] = walk(e, false)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e, false)
			}
		case json.Number:
			return v.String()
		case bool:
			return strconv.FormatBool(v)
		}
		return v
	}
	top, ok := tree.(map[string]any)
	if !ok {
		return json.Marshal(walk(tree, false))
	}
	// The settings of the Go hooks are decoded into their author's type: left as written.
	set, hasSet := top["settings"]
	delete(top, "settings")
	if list, ok := top["hooks"].([]any); ok {
		for _, e := range list {
			walk(e, true)
		}
		delete(top, "hooks")
		prov, hasProv := top["provenance"].(bool)
		walk(top, false)
		top["hooks"] = list
		if hasProv {
			top["provenance"] = prov // a boolean field of the document
		}
	} else {
		walk(top, false)
	}
	if hasSet {
		top["settings"] = set
	}
	return json.Marshal(top)
}

// settings returns the settings key's JSON, or nil when it is absent or null.
func settings(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// DecodeSettings decodes c.Settings (the config's settings key) into v, a non-nil pointer,
// strictly as the rest of the config: unknown keys (case-sensitive), duplicate keys and values
// of the wrong shape are errors that name where they are, e.g.
// `settings: unknown field "tenat" (valid: required, tenant)`; they wrap ErrInvalid. When the
// config has no settings, v is left as it is and the result is nil, so v's prior values are
// the defaults.
func (c *Config) DecodeSettings(v any) error {
	if len(c.Settings) == 0 {
		return nil
	}
	if errs := unmarshal(c.Settings, v, "settings"); len(errs) > 0 {
		return invalid(utilerrors.NewAggregate(errs))
	}
	return nil
}
