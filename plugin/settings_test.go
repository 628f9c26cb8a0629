package plugin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridgev2"
)

type testSettings struct {
	Tenant   string `json:"tenant"`
	Replicas int    `json:"replicas"`
}

// envPlugin returns a Plugin with args whose environment is env alone; the process's
// environment holds a broken SYNCHOOK_CONFIG, so that reading it instead of Getenv fails.
func envPlugin(t *testing.T, env map[string]string, args ...string) *Plugin {
	t.Helper()
	t.Setenv(config.EnvVar, "settings: {from: the-process}\nhooks: nope\n")
	p := New()
	p.Args = args
	p.Getenv = func(k string) string { return env[k] }
	var stdout, stderr bytes.Buffer
	p.Stdin, p.Stdout, p.Stderr = strings.NewReader(""), &stdout, &stderr
	return p
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUnmarshalConfigReadsTheConfigTheCommandWillUse(t *testing.T) {
	file := writeConfig(t, "settings: {tenant: from-file, replicas: 2}\n")
	env := map[string]string{config.EnvVar: "settings: {tenant: from-env, replicas: 3}\n"}
	v2 := map[string]string{
		bridgev2.Handshake.MagicCookieKey: bridgev2.Handshake.MagicCookieValue,
		bridgev2.ConfigEnvVar:             "settings: {tenant: from-plugin-config}\n",
		config.EnvVar:                     "settings: {tenant: from-env}\n",
	}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want testSettings
	}{
		{"serve --config", env, []string{"serve", "--config", file, "--bind-address", "0"}, testSettings{"from-file", 2}},
		{"serve --config=", env, []string{"serve", "--config=" + file}, testSettings{"from-file", 2}},
		{"mutate --config", env, []string{"mutate", "--type", "CreatePhysical", "-f", "x.yaml", "--config", file}, testSettings{"from-file", 2}},
		{"replay with the flag after DIR", env, []string{"replay", "dir", "--config", file}, testSettings{"from-file", 2}},
		{"serve without --config reads SYNCHOOK_CONFIG through Getenv", env, []string{"serve"}, testSettings{"from-env", 3}},
		{"replay without --config", env, []string{"replay", "dir"}, testSettings{"from-env", 3}},
		{"plugin v2 reads PLUGIN_CONFIG first", v2, nil, testSettings{"from-plugin-config", 1}},
		{"no config keeps the defaults", map[string]string{}, []string{"serve"}, testSettings{"default", 1}},
		{"a config without settings keeps the defaults", map[string]string{config.EnvVar: "hooks: []\n"}, []string{"serve"}, testSettings{"default", 1}},
		{"version loads no config", map[string]string{config.EnvVar: "settings: {nope: 1}\n"}, []string{"version"}, testSettings{"default", 1}},
		{"bad flags load no config (Start reports them)", map[string]string{config.EnvVar: "settings: {nope: 1}\n"}, []string{"serve", "--nope"}, testSettings{"default", 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := envPlugin(t, tc.env, tc.args...)
			got := testSettings{Tenant: "default", Replicas: 1}
			if err := p.UnmarshalConfig(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("settings %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUnmarshalConfigIsStrict(t *testing.T) {
	p := envPlugin(t, map[string]string{config.EnvVar: "settings: {tenant: a, tenat: b}\n"}, "serve")
	var s testSettings
	err := p.UnmarshalConfig(&s)
	if err == nil || !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("error %v, want one wrapping config.ErrInvalid", err)
	}
	for _, want := range []string{"env SYNCHOOK_CONFIG", `settings: unknown field "tenat" (valid: replicas, tenant)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// An invalid config is reported as Start would report it.
	p = envPlugin(t, map[string]string{config.EnvVar: "hooks: [{labls: {}}]\n"}, "serve")
	if err := p.UnmarshalConfig(&s); err == nil || !strings.Contains(err.Error(), `unknown field "labls"`) {
		t.Errorf("error %v, want the config's own error", err)
	}
}

// goLabel is a Go hook that labels pods on CreatePhysical.
func goLabel() hooks.ClientHook {
	return hooks.NewFunc("go-label", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, func(_ context.Context, obj client.Object) (client.Object, error) {
		obj.SetLabels(map[string]string{"go": "yes"})
		return obj, nil
	})
}

func TestGoHooksReplaceTheDefaultConfig(t *testing.T) {
	run := func(t *testing.T, p *Plugin, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := p.run(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		return stdout.String()
	}
	mutate := []string{"mutate", "--type", "CreatePhysical", "-f", "../examples/pod.yaml", "-o", "yaml"}

	p := envPlugin(t, map[string]string{}, mutate...)
	if err := p.Register(goLabel()); err != nil {
		t.Fatal(err)
	}
	out := run(t, p, mutate...)
	if strings.Contains(out, config.DefaultLabel) || !strings.Contains(out, "go: \"yes\"") {
		t.Errorf("with a Go hook and no config, want the Go hook alone:\n%s", out)
	}

	// A config given still runs before the Go hooks.
	p = envPlugin(t, map[string]string{config.EnvVar: "hooks:\n- resources: [{apiVersion: v1, kind: Pod}]\n  types: [CreatePhysical]\n  labels: {annotations: {from: config}}\n"})
	if err := p.Register(goLabel()); err != nil {
		t.Fatal(err)
	}
	if out := run(t, p, mutate...); !strings.Contains(out, "from: config") || !strings.Contains(out, "go: \"yes\"") {
		t.Errorf("with a config and a Go hook, want both:\n%s", out)
	}

	// Without Go hooks the default stays.
	p = envPlugin(t, map[string]string{})
	if out := run(t, p, mutate...); !strings.Contains(out, config.DefaultLabel) {
		t.Errorf("without Go hooks, want the default label:\n%s", out)
	}
}

func TestGetenvIsHonouredByEveryCommand(t *testing.T) {
	// The process's SYNCHOOK_CONFIG (set by envPlugin) is invalid; the Plugin's is not, or the
	// other way round: each command must read the Plugin's.
	bad := map[string]string{config.EnvVar: "hooks: [{labls: {}}]\n"}
	t.Run("mutate", func(t *testing.T) {
		p := envPlugin(t, map[string]string{})
		var stdout, stderr bytes.Buffer
		if code := p.run([]string{"mutate", "--type", "CreatePhysical", "-f", "../examples/pod.yaml"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
		p = envPlugin(t, bad)
		stderr.Reset()
		if code := p.run([]string{"mutate", "--type", "CreatePhysical", "-f", "../examples/pod.yaml"}, strings.NewReader(""), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `"labls"`) {
			t.Errorf("exit %d, stderr %q; want 2 from the Plugin's config", code, stderr.String())
		}
	})
	t.Run("replay", func(t *testing.T) {
		p := envPlugin(t, bad)
		var stdout, stderr bytes.Buffer
		dir := filepath.Join(t.TempDir(), "capture")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code := p.run([]string{"replay", dir}, strings.NewReader(""), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `"labls"`) {
			t.Errorf("exit %d, stderr %q; want 2 from the Plugin's config", code, stderr.String())
		}
	})
	t.Run("serve", func(t *testing.T) {
		p := envPlugin(t, bad, "serve", "--bind-address", "0", "--socket-path", filepath.Join(t.TempDir(), "s"), "--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--cert-dir", t.TempDir())
		err := p.Start()
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Code != 2 || !strings.Contains(p.Stderr.(*bytes.Buffer).String(), `"labls"`) {
			t.Errorf("Start: %v, stderr %q; want exit 2 from the Plugin's config", err, p.Stderr.(*bytes.Buffer).String())
		}
	})
	t.Run("plugin v2", func(t *testing.T) {
		env := map[string]string{
			bridgev2.Handshake.MagicCookieKey: bridgev2.Handshake.MagicCookieValue,
			bridgev2.ConfigEnvVar:             "hooks: [{labls: {}}]\n",
		}
		p := envPlugin(t, env)
		err := p.Start()
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Code != 2 || !strings.Contains(p.Stderr.(*bytes.Buffer).String(), "labls") {
			t.Errorf("Start: %v, stderr %q; want exit 2 from PLUGIN_CONFIG read with Getenv", err, p.Stderr.(*bytes.Buffer).String())
		}
	})
}
