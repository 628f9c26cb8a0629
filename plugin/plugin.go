package plugin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/engine"
)

// version is the build's version, set with -ldflags "-X github.com/synchook/synchook/plugin.version=v1.2.3".
var version = "dev"

// Version returns the build's version ("dev" unless set at link time).
func Version() string { return version }

// Context is what Init returns, as vcluster-sdk's MustInit returns its register context: the
// process's arguments and environment as the program will use them.
type Context struct {
	// Args are the command-line arguments without the program name.
	Args []string
	// PluginV2 is true when vcluster started this program as a plugin v2 (go-plugin magic
	// cookie, no arguments): Start then serves vcluster instead of running a command.
	PluginV2 bool
}

// Plugin is one synchook program: the Go hooks registered on it plus the full synchook CLI
// (serve, mutate, install, version). Most programs use the package-level functions, which work
// on one default Plugin; New makes another, e.g. for tests. A Plugin's methods are safe for
// concurrent use, but hooks registered after Start are not served.
type Plugin struct {
	mu      sync.Mutex
	hooks   []hooks.ClientHook
	started bool
	// Args, Stdin, Stdout, Stderr and Getenv are the process's unless set before Start (or,
	// for UnmarshalConfig, before it). Getenv reads every environment variable synchook
	// reads: the config (SYNCHOOK_CONFIG, PLUGIN_CONFIG), the plugin v2 start
	// (VCLUSTER_PLUGIN), the bridge's address and name, and the SYNCHOOK_* settings of plugin
	// v2 mode; nil means os.Getenv. Only hashicorp/go-plugin, which vcluster's plugin v2 start
	// runs, reads its own variables from the process.
	Args           []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// New returns a Plugin with no hooks that runs with the process's arguments, standard streams
// and environment.
func New() *Plugin {
	return &Plugin{Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

var (
	defaultOnce   sync.Once
	defaultPlugin *Plugin
)

// Default returns the Plugin that Init, Register and Start use.
func Default() *Plugin {
	defaultOnce.Do(func() { defaultPlugin = New() })
	return defaultPlugin
}

// Init prepares the default Plugin and returns its Context. It never fails today; the error is
// kept so that the signature stays when it can.
func Init() (*Context, error) { return Default().Init() }

// MustInit is Init that exits the process (code 1) on error, as vcluster-sdk's MustInit.
func MustInit() *Context {
	ctx, err := Init()
	if err != nil {
		fmt.Fprintf(os.Stderr, "synchook: %v\n", err)
		os.Exit(exitFailed)
	}
	return ctx
}

// Register adds a Go hook to the default Plugin (see Plugin.Register).
func Register(hook hooks.ClientHook) error { return Default().Register(hook) }

// MustRegister is Register that exits the process (code 2) on error.
func MustRegister(hook hooks.ClientHook) {
	if err := Register(hook); err != nil {
		fmt.Fprintf(os.Stderr, "synchook: %v\n", err)
		os.Exit(exitUsage)
	}
}

// Start runs the default Plugin (see Plugin.Start).
func Start() error { return Default().Start() }

// MustStart runs the default Plugin and exits the process with its exit code: 0 on success, 1
// when it failed, 2 for bad flags or an invalid configuration.
func MustStart() {
	err := Start()
	var exit *ExitError
	switch {
	case err == nil:
		os.Exit(exitOK)
	case errors.As(err, &exit):
		os.Exit(exit.Code)
	default:
		fmt.Fprintf(os.Stderr, "synchook: %v\n", err)
		os.Exit(exitFailed)
	}
}

// ExitError is the error Start returns when the command failed; the command has already written
// its message to Stderr. Code is the process exit code (1 failed, 2 bad flags or config).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit code %d", e.Code) }

// Init returns p's Context.
func (p *Plugin) Init() (*Context, error) {
	return &Context{Args: p.Args, PluginV2: bridgev2.Started(p.Args, p.getenv)}, nil
}

// Register adds hook to p: it runs after the hooks of the config, in registration order, on
// every transport. A Plugin with Go hooks runs no built-in default config: without a config
// (--config, SYNCHOOK_CONFIG, PLUGIN_CONFIG) only its Go hooks run. hook is a hooks.ClientHook with Name, Resource and any of the eight
// MutateXxx methods (the signatures of vcluster-sdk's hooks). Errors: a nil hook, an empty or
// repeated name, or Register after Start. The resource and the hook types are checked when
// the registry is built (at Start), where a bad one stops the program with exit code 2.
func (p *Plugin) Register(hook hooks.ClientHook) error {
	if hook == nil {
		return errors.New("register hook: nil")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return fmt.Errorf("register hook %q: the plugin has already started", hook.Name())
	}
	if hook.Name() == "" {
		return errors.New("register hook: empty name")
	}
	for _, h := range p.hooks {
		if h.Name() == hook.Name() {
			return fmt.Errorf("register hook %q: a hook with this name is already registered", hook.Name())
		}
	}
	p.hooks = append(p.hooks, hook)
	return nil
}

// Start runs p: as a vcluster plugin v2 when vcluster started the program (Context.PluginV2),
// else the synchook command in p.Args (serve, mutate, install, version, help). It returns when
// the command ends: nil for exit code 0, else an *ExitError.
func (p *Plugin) Start() error {
	p.mu.Lock()
	p.started = true
	p.mu.Unlock()
	var code int
	if bridgev2.Started(p.Args, p.getenv) {
		code = p.servePluginV2(p.Stderr)
	} else {
		code = p.run(p.Args, p.Stdin, p.Stdout, p.Stderr)
	}
	if code != exitOK {
		return &ExitError{Code: code}
	}
	return nil
}

// hasHooks reports whether any Go hook is registered on p: then no config means no config
// hooks, not the built-in default.
func (p *Plugin) hasHooks() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hooks) > 0
}

// registerHooks adds p's Go hooks to reg (sidecar.RegisterFunc).
func (p *Plugin) registerHooks(reg *engine.Registry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.hooks {
		if err := reg.Register(h); err != nil {
			return err
		}
	}
	return nil
}

func (p *Plugin) getenv(key string) string {
	if p.Getenv == nil {
		return os.Getenv(key)
	}
	return p.Getenv(key)
}
