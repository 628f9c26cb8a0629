package plugin

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/sidecar"
)

// UnmarshalConfig decodes the settings of the default Plugin's hook config into v (see
// Plugin.UnmarshalConfig).
func UnmarshalConfig(v any) error { return Default().UnmarshalConfig(v) }

// MustUnmarshalConfig is UnmarshalConfig that exits the process (code 2, an invalid
// configuration) on error, after writing it to stderr.
func MustUnmarshalConfig(v any) {
	if err := UnmarshalConfig(v); err != nil {
		fmt.Fprintf(os.Stderr, "synchook: %v\n", err)
		os.Exit(exitUsage)
	}
}

// UnmarshalConfig decodes the top-level settings key of the hook config that p's command will
// run with into v, a non-nil pointer (usually to a struct with json tags), as vcluster-sdk's
// plugin.UnmarshalConfig does with a plugin's config. Call it after Init and before Register,
// to build the hooks from it:
//
//	settings:
//	  tenant: team-a
//
// The config is the one Start will load: the file of the command's --config flag (serve,
// mutate, replay), else the YAML in SYNCHOOK_CONFIG; started by vcluster as a plugin v2, the
// YAML in PLUGIN_CONFIG, then SYNCHOOK_CONFIG (all read with p.Getenv). Decoding is strict:
// an unknown key (case-sensitive), a repeated key or a value of the wrong shape is an error
// naming it, e.g. `config env SYNCHOOK_CONFIG: invalid synchook config: settings: unknown
// field "tenat" (valid: tenant)`; errors about the config's content wrap config.ErrInvalid.
// Without a config, without a settings key, and for commands that load no config (version,
// install, help, bad flags: Start reports those), v is left as it is, so the values v holds
// are the defaults.
func (p *Plugin) UnmarshalConfig(v any) error {
	path, envVars, ok := p.configSource()
	if !ok {
		return nil
	}
	cfg, src, err := config.Load(path, p.getenv, envVars...)
	if err != nil {
		return err
	}
	if err := cfg.DecodeSettings(v); err != nil {
		return fmt.Errorf("config %s: %w", src, err)
	}
	return nil
}

// configSource returns where the command in p.Args finds its config, as sidecar.BuildRegistry
// takes it (a file, else the environment variables in order); ok is false when the command
// loads none.
func (p *Plugin) configSource() (path string, envVars []string, ok bool) {
	if bridgev2.Started(p.Args, p.getenv) {
		return "", []string{bridgev2.ConfigEnvVar, config.EnvVar}, true
	}
	if len(p.Args) == 0 {
		return "", nil, false
	}
	var (
		fs   *pflag.FlagSet
		file *string // the flag's value, set by fs.Parse
	)
	switch p.Args[0] {
	case "serve":
		var opts *sidecar.Options
		fs, opts, _ = serveFlags(p.getenv)
		file = &opts.ConfigFile
	case "mutate":
		var o *mutateOptions
		fs, o = mutateFlags()
		file = &o.configFile
	case "replay":
		var o *replayOptions
		fs, o = replayFlags()
		file = &o.configFile
	default:
		return "", nil, false
	}
	fs.SetOutput(io.Discard)
	if fs.Parse(p.Args[1:]) != nil {
		return "", nil, false
	}
	return *file, []string{config.EnvVar}, true
}
