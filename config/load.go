package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvVar is the environment variable that holds the config YAML when no file is given.
const EnvVar = "SYNCHOOK_CONFIG"

// SourceKind says where a config came from.
type SourceKind string

// The places Load reads a config from, in order of precedence. The zero SourceKind is a config
// given inline in Go (Parse, a Config literal).
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

// Load is the one way a synchook program reads its config (serve, mutate, replay, the vcluster
// plugins v1 and v2, plugin.UnmarshalConfig, and synchook test): it returns the config and
// where it came from: the YAML file at path when path is not empty; else the first of envVars
// (SYNCHOOK_CONFIG when none are given; the vcluster plugin v2 mode gives PLUGIN_CONFIG, then
// SYNCHOOK_CONFIG), looked up with env (os.Getenv when nil), that holds anything but white
// space — or, for any but SYNCHOOK_CONFIG, "null" or "{}" (what YAML encoders write for no
// config); else Default().
//
// A relative file named in the config (policyFile) is relative to the config file's directory,
// as kubectl, kustomize and helm resolve them, never to the working directory; a config given
// in an environment variable has no directory, and a relative file in it is an error naming
// the key and the variable. Errors name the source; errors about the content wrap ErrInvalid,
// while a file that cannot be read does not.
func Load(path string, env func(string) string, envVars ...string) (*Config, Source, error) {
	return Reader{}.Load(path, env, envVars...)
}

// Reader reads configs as Load and Parse do, with every file read by ReadFile: the config file
// and the policyFiles it names (resolved as Load resolves them, then read by ReadFile rather
// than by the policy compiler). synchook test reads through an os.Root, so that a config it
// tests names no file outside the directory it runs in.
type Reader struct {
	// ReadFile reads the file at name (a path as Load resolves it). Default os.ReadFile.
	ReadFile func(name string) ([]byte, error)
}

// Parse is Parse with r's ReadFile.
func (r Reader) Parse(data []byte) (*Config, error) { return parse(data, Source{}, r.ReadFile) }

// Load is Load with r's ReadFile.
func (r Reader) Load(path string, env func(string) string, envVars ...string) (*Config, Source, error) {
	read := r.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	if path != "" {
		src := Source{Kind: SourceFile, Name: path}
		data, err := read(path)
		if err != nil {
			return nil, src, fmt.Errorf("read config: %w", err)
		}
		c, err := parse(data, src, r.ReadFile)
		if err != nil {
			return nil, src, fmt.Errorf("config %s: %w", src, err)
		}
		return c, src, nil
	}
	if env == nil {
		env = os.Getenv
	}
	if len(envVars) == 0 {
		envVars = []string{EnvVar}
	}
	for _, name := range envVars {
		data := env(name)
		if t := strings.TrimSpace(data); t == "" || (name != EnvVar && (t == "null" || t == "{}")) {
			continue
		}
		src := Source{Kind: SourceEnv, Name: name}
		c, err := parse([]byte(data), src, r.ReadFile)
		if err != nil {
			return nil, src, fmt.Errorf("config %s: %w", src, err)
		}
		return c, src, nil
	}
	return Default(), Source{Kind: SourceDefault}, nil
}

// resolve returns the path of the file name that a config from s names (policyFile): name
// when it is absolute; relative to the directory of the config file when s is a file; else
// (a config given inline: an environment variable, Parse, a Config built in Go) an error
// saying so, the detail of a field error at the key.
func (s Source) resolve(name string) (string, error) {
	switch {
	case filepath.IsAbs(name):
		return name, nil
	case s.Kind == SourceFile:
		return filepath.Join(filepath.Dir(s.Name), name), nil
	}
	where := "inline"
	if s.Kind == SourceEnv {
		where += " in " + s.Name
	}
	return "", fmt.Errorf("%q is relative, and this config was given %s, which has no directory: give an absolute path", name, where)
}
