package hooktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/internal/bridgev2"
)

// valuesConfig returns synchook's config in the vcluster values file f.Values and the
// environment variable vcluster hands it to synchook in, for either layout synchook ships:
//   - plugin.yaml (vcluster plugin v2): plugins.synchook.config, handed over as YAML in
//     PLUGIN_CONFIG (bridgev2.ConfigEnvVar);
//   - plugin-v1.yaml (the legacy plugin v1 sidecar): plugin.synchook.env's SYNCHOOK_CONFIG
//     (config.EnvVar), its value as written.
//
// Anything else is an invalid test file whose error says which key it looked for and did not
// find, or why the config there cannot be read offline (an env valueFrom, a --config file in
// the pod).
func (f *File) valuesConfig() (envVar, text string, err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %s: values: %s: %s", ErrInvalid, f.path, f.Values, fmt.Sprintf(format, a...))
	}
	data, err := f.root.ReadFile(filepath.Join(f.dir, f.Values))
	if err != nil {
		return "", "", fmt.Errorf("%w %s: values: %w", ErrInvalid, f.path, err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return "", "", bad("%v", err)
	}
	var top map[string]any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber() // the config's numbers as written
	if err := dec.Decode(&top); err != nil {
		return "", "", bad("not a mapping of Helm values: %v", err)
	}
	plugins, _ := top["plugins"].(map[string]any)
	v2, hasV2 := plugins["synchook"]
	plugin, _ := top["plugin"].(map[string]any)
	v1, hasV1 := plugin["synchook"]
	switch {
	case hasV2 && hasV1:
		return "", "", bad("both plugins.synchook (plugin v2) and plugin.synchook (plugin v1): keep one")
	case hasV2:
		m, _ := v2.(map[string]any)
		cfg := m["config"]
		if cfg == nil {
			return "", "", bad("plugins.synchook has no config (the config of vcluster plugin v2, as in plugin.yaml)")
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			return "", "", bad("plugins.synchook.config: %v", err)
		}
		return bridgev2.ConfigEnvVar, string(out), nil
	case hasV1:
		return f.v1Config(v1, bad)
	}
	has := "its keys: " + keyList(top)
	if plugins != nil {
		has = "plugins has: " + keyList(plugins)
	}
	return "", "", bad("no synchook config: no plugins.synchook.config (vcluster plugin v2, as in plugin.yaml) and no plugin.synchook "+
		"(the legacy plugin v1 sidecar, as in plugin-v1.yaml, with its config in the env var %s); %s", config.EnvVar, has)
}

// v1Config returns the config of the legacy plugin v1 sidecar plugin.synchook (v1): the value
// of its env var SYNCHOOK_CONFIG, which the sidecar reads when its args name no --config file.
func (f *File) v1Config(v1 any, bad func(string, ...any) error) (envVar, text string, err error) {
	sidecar, _ := v1.(map[string]any)
	args, _ := sidecar["args"].([]any)
	for i, a := range args {
		s, _ := a.(string)
		if s == "--config" || s == "-config" || strings.HasPrefix(s, "--config=") || strings.HasPrefix(s, "-config=") {
			if !strings.Contains(s, "=") && i+1 < len(args) {
				s += fmt.Sprintf(" %v", args[i+1])
			}
			return "", "", bad("plugin.synchook.args give %s, a file in the pod that synchook test cannot read: give that file as the test file's config:", s)
		}
	}
	env, _ := sidecar["env"].([]any)
	var names []string
	for _, e := range env {
		v, _ := e.(map[string]any)
		name, _ := v["name"].(string)
		names = append(names, name)
		if name != config.EnvVar {
			continue
		}
		if value, ok := v["value"].(string); ok {
			return config.EnvVar, value, nil
		}
		if _, ok := v["valueFrom"]; ok {
			return "", "", bad("plugin.synchook.env %s comes from valueFrom, which synchook test cannot read (no cluster): give the config as the test file's config:", config.EnvVar)
		}
	}
	has := ""
	if len(names) > 0 {
		has = "; env has: " + strings.Join(names, ", ")
	}
	return "", "", bad("plugin.synchook.env has no %s with a value (the legacy plugin v1 sidecar's config; without it the sidecar runs the built-in default)%s", config.EnvVar, has)
}

// keyList returns the keys of m, sorted and comma-separated; "none" when there are none.
func keyList(m map[string]any) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
