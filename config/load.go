package config

import (
	"fmt"
	"os"
	"strings"
)

// EnvVar is the environment variable that holds the config YAML when no file is given.
const EnvVar = "SYNCHOOK_CONFIG"

// SourceKind says where a config came from.
type SourceKind string

// The places Load reads a config from, in order of precedence.
const (
	// SourceFile is a YAML file named on the command line (--config).
	SourceFile SourceKind = "file"
	// SourceEnv is the environment variable SYNCHOOK_CONFIG holding YAML.
	SourceEnv SourceKind = "env"
	// SourceDefault is Default().
	SourceDefault SourceKind = "default"
)

// Source is where Load found the config.
type Source struct {
	// Kind is the kind of place.
	Kind SourceKind
	// Name is the file path or the environment variable; empty for the default.
	Name string
}

// String describes s for logs: `file "/etc/synchook/config.yaml"`, "env SYNCHOOK_CONFIG" or
// "built-in default".
func (s Source) String() string {
	switch s.Kind {
	case SourceFile:
		return fmt.Sprintf("file %q", s.Name)
	case SourceEnv:
		return "env " + s.Name
	default:
		return "built-in default"
	}
}

// Load returns the config and where it came from: the YAML file at path when path is not
// empty; else the YAML in the environment variable SYNCHOOK_CONFIG (looked up with env, or
// os.Getenv when env is nil) when it holds anything but white space; else Default(). The YAML
// goes through Parse. Errors name the source; errors about the content wrap ErrInvalid, while
// a file that cannot be read does not.
func Load(path string, env func(string) string) (*Config, Source, error) {
	return LoadFrom(path, env, EnvVar)
}

// LoadFrom is Load with the environment variables to try, in order, instead of SYNCHOOK_CONFIG
// alone: the first that holds anything but white space, "null" or "{}" (what YAML encoders
// write for no config) is the config. The vcluster plugin v2 mode reads PLUGIN_CONFIG, then
// SYNCHOOK_CONFIG.
func LoadFrom(path string, env func(string) string, envVars ...string) (*Config, Source, error) {
	if path != "" {
		src := Source{Kind: SourceFile, Name: path}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, src, fmt.Errorf("read config: %w", err)
		}
		c, err := Parse(data)
		if err != nil {
			return nil, src, fmt.Errorf("config %s: %w", src, err)
		}
		return c, src, nil
	}
	if env == nil {
		env = os.Getenv
	}
	for _, name := range envVars {
		data := env(name)
		if t := strings.TrimSpace(data); t == "" || (name != EnvVar && (t == "null" || t == "{}")) {
			continue
		}
		src := Source{Kind: SourceEnv, Name: name}
		c, err := Parse([]byte(data))
		if err != nil {
			return nil, src, fmt.Errorf("config %s: %w", src, err)
		}
		return c, src, nil
	}
	return Default(), Source{Kind: SourceDefault}, nil
}
