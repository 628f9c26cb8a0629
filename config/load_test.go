package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synchook/synchook/config"
)

// labelPolicy is a MutatingAdmissionPolicy that sets the label team to value on Pods.
func labelPolicy(value string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"team": "` + value + `"}}}'
`
}

const policyFileConfig = "hooks:\n  - {name: team, types: [CreatePhysical], policyFile: policy.yaml}\n"

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A relative file named in a config file is relative to that file's directory, whatever the
// working directory: the repo's examples/policies loads from the repo root, from its own
// directory and from elsewhere.
func TestLoadTakesRelativeFilesRelativeToTheConfigFile(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, cwd, path string }{
		{"from the repo root with the config's path from there", root, "examples/policies/config.yaml"},
		{"from the config's own directory", filepath.Join(root, "examples", "policies"), "config.yaml"},
		{"from another directory with an absolute path", t.TempDir(), filepath.Join(root, "examples", "policies", "config.yaml")},
		{"from a directory below with a path up", filepath.Join(root, "config"), "../examples/policies/config.yaml"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(tt.cwd)
			cfg, src, err := config.Load(tt.path, nil)
			if err != nil {
				t.Fatalf("Load(%q) in %s: %v", tt.path, tt.cwd, err)
			}
			if src.Kind != config.SourceFile || len(cfg.Hooks) != 7 {
				t.Errorf("source %v, %d hooks; want the file and its 7 hooks", src, len(cfg.Hooks))
			}
		})
	}
}

// A file of the same name in the working directory is never read instead of the one beside the
// config: with the config's own file there, it is used; without, the error names the file
// beside the config.
func TestLoadNeverReadsASameNamedFileInTheWorkingDirectory(t *testing.T) {
	cfgDir, cwd := t.TempDir(), t.TempDir()
	cfgPath := filepath.Join(cfgDir, "config.yaml")
	write(t, cfgPath, policyFileConfig)
	write(t, filepath.Join(cwd, "policy.yaml"), "this is not a policy: [")
	t.Chdir(cwd)

	t.Run("the file beside the config is missing: the error names it", func(t *testing.T) {
		_, _, err := config.Load(cfgPath, nil)
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), filepath.Join(cfgDir, "policy.yaml")) {
			t.Errorf("error %v; want ErrInvalid naming %s", err, filepath.Join(cfgDir, "policy.yaml"))
		}
	})
	t.Run("the file beside the config is there: it is the one used", func(t *testing.T) {
		write(t, filepath.Join(cfgDir, "policy.yaml"), labelPolicy("beside"))
		if _, _, err := config.Load(cfgPath, nil); err != nil {
			t.Errorf("Load: %v (the working directory's policy.yaml is not a policy)", err)
		}
	})
}

// A config given inline has no directory: a relative file in it is refused naming the key and
// where the config came from; an absolute one works.
func TestInlineConfigRefusesRelativeFiles(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "policy.yaml")
	write(t, abs, labelPolicy("inline"))
	relative := "hooks:\n  - {name: a, types: [CreatePhysical], labels: {labels: {a: b}}, resources: [{apiVersion: v1, kind: Pod}]}\n" +
		"  - {name: b, types: [CreatePhysical], labels: {labels: {b: c}}, resources: [{apiVersion: v1, kind: Service}]}\n" +
		"  - {name: team, types: [CreatePhysical], policyFile: x.yaml}\n"
	absolute := strings.Replace(policyFileConfig, "policy.yaml", abs, 1)
	env := func(name, value string) func(string) string {
		return func(k string) string {
			if k == name {
				return value
			}
			return ""
		}
	}
	for _, tt := range []struct {
		name string
		load func() error
		want string // "" : loads
	}{
		{
			name: "in PLUGIN_CONFIG, as vcluster gives plugins.synchook.config to a plugin v2",
			load: func() error {
				_, _, err := config.Load("", env("PLUGIN_CONFIG", relative), "PLUGIN_CONFIG", config.EnvVar)
				return err
			},
			want: `config env PLUGIN_CONFIG: invalid synchook config: hooks[2].policyFile: Invalid value: "x.yaml" is relative, and this config was given inline in PLUGIN_CONFIG, which has no directory: give an absolute path`,
		},
		{
			name: "in SYNCHOOK_CONFIG",
			load: func() error {
				_, _, err := config.Load("", env(config.EnvVar, relative))
				return err
			},
			want: `hooks[2].policyFile: Invalid value: "x.yaml" is relative, and this config was given inline in SYNCHOOK_CONFIG, which has no directory: give an absolute path`,
		},
		{
			name: "to Parse",
			load: func() error {
				_, err := config.Parse([]byte(relative))
				return err
			},
			want: `hooks[2].policyFile: Invalid value: "x.yaml" is relative, and this config was given inline, which has no directory: give an absolute path`,
		},
		{
			name: "a Config built in Go, at Build",
			load: func() error {
				cfg, err := config.Parse([]byte(absolute))
				if err != nil {
					return err
				}
				cfg.Hooks[0].PolicyFile = "policy.yaml"
				return cfg.Validate()
			},
			want: `hooks[0].policyFile: Invalid value: "policy.yaml" is relative, and this config was given inline, which has no directory`,
		},
		{
			name: "an absolute file in PLUGIN_CONFIG loads",
			load: func() error {
				_, _, err := config.Load("", env("PLUGIN_CONFIG", absolute), "PLUGIN_CONFIG", config.EnvVar)
				return err
			},
		},
		{
			name: "an absolute file given to Parse loads",
			load: func() error {
				_, err := config.Parse([]byte(absolute))
				return err
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.load()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n%v\nwant ErrInvalid with\n%s", err, tt.want)
			}
		})
	}
}
