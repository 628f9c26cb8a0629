// Package hooktest is `synchook test`: test files that name a hook config, input objects, hook
// types and what each write must give, run offline through the same engine the server runs,
// with the round trip a syncer depends on (write down, read back, no trace) checked for every
// write case by default. The format is documented in docs/testing.md.
package hooktest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/hooks"
)

// FileName is the name of a test file; *.FileName ("pods.synchook-test.yaml") too.
const FileName = "synchook-test.yaml"

// File is one test file.
type File struct {
	// Name names the suite in the output; default the file's path.
	Name string `json:"name,omitempty"`
	// Config is the synchook config the hooks come from: a file name (YAML, relative to the
	// test file) or the config inline (a mapping with hooks:, as in the file).
	Config json.RawMessage `json:"config,omitempty"`
	// Values is a vcluster values file whose synchook config is the config: plugins.synchook.config
	// (plugin v2, plugin.yaml) or plugin.synchook's env var SYNCHOOK_CONFIG (the legacy plugin
	// v1 sidecar, plugin-v1.yaml); see valuesConfig.
	// At most one of Config and Values; neither: no config hooks (a program's Go hooks only).
	Values string `json:"values,omitempty"`
	// ConfigError, when set, says the config must be refused with an error containing it; the
	// file then has no cases.
	ConfigError string `json:"configError,omitempty"`
	// Namespaces are the Namespace objects hooks look up (labels fromNamespace, a policy's
	// namespaceObject and namespaceSelector), and the only ones there are: a hook that reads
	// one the file does not list fails the request with an error naming it
	// (namespaces.ErrNotFound).
	Namespaces []corev1.Namespace `json:"namespaces,omitempty"`
	// Params are the param objects of MutatingAdmissionPolicies (each a file, relative to the
	// test file, or the object inline) that the cluster holds: every policy entry of the config
	// gets them after its own params (config.Config.AddParams), so its bindings' paramRefs
	// select from them, in the load-time idempotency self-test, the cases and their round
	// trips alike. A file with params: needs a config with a policy entry.
	Params []json.RawMessage `json:"params,omitempty"`
	// Bindings are MutatingAdmissionPolicyBindings the cluster holds (each a file or inline):
	// each goes to the policy entry whose policy its spec.policyName names, after the entry's
	// own bindings (config.Config.AddBindings); one that names no policy of the config is
	// refused with the config.
	Bindings []json.RawMessage `json:"bindings,omitempty"`
	// Transport is how the config is served: "vcluster" (default: a vcluster plugin, whose
	// protocols send the object only) or "admission" (`synchook serve` as kube-apiserver's
	// mutating webhook, which also sends the stored object on UPDATE: a case's oldObject).
	// A file with values: (plugin.yaml) is a vcluster config.
	Transport string `json:"transport,omitempty"`
	// VirtualNamespaces: the Namespaces are the virtual cluster's, as under vcluster, so an
	// object of a physical hook type came from the one its vcluster.loft.sh/object-namespace
	// annotation names. Default false: an object's own namespace.
	VirtualNamespaces bool `json:"virtualNamespaces,omitempty"`
	// RequireHooks names Go hooks the file tests (a program's own, package plugin): a binary
	// that has none of that name skips the file (`synchook test` in a tree whose examples hold
	// Go-hook programs, each tested with its own binary).
	RequireHooks []string `json:"requireHooks,omitempty"`
	// Cases run in order, each on a fresh copy of its object.
	Cases []Case `json:"cases,omitempty"`

	path, dir string
	// root is what every file is read through (Options.Root).
	root *fileRoot
}

// Case is one object through one hook type.
type Case struct {
	// Name names the case; unique in the file.
	Name string `json:"name"`
	// Type is the hook type; default CreatePhysical.
	Type string `json:"type,omitempty"`
	// Object is the object the syncer sends: a file (relative to the test file, YAML or JSON)
	// or the object inline.
	Object json.RawMessage `json:"object"`
	// OldObject is the stored object kube-apiserver sends with an UPDATE (request.oldObject;
	// a policy's CEL oldObject): a file or inline, on an Update type, in a file of transport
	// admission only (vcluster sends none). Default none.
	OldObject json.RawMessage `json:"oldObject,omitempty"`
	// Expect is what must come out.
	Expect Expect `json:"expect,omitempty"`
}

// Expect is what a case must give.
type Expect struct {
	// Object is the object after the hooks (a file or inline), compared by Match. Its
	// synchook.io/undo, when present, is compared as the undo's opened entries (a JSON list of
	// {path, original | absent}); when absent the undo is not compared (the round trip checks
	// it). synchook.io/mutated-by is compared without the build version.
	Object json.RawMessage `json:"object,omitempty"`
	// Match is "exact" (default: the whole object) or "subset" (every field Object names, with
	// its value; lists element by element).
	Match string `json:"match,omitempty"`
	// Error, when set, says the request must fail with an error containing it.
	Error string `json:"error,omitempty"`
	// ReadKeeps are JSON Pointers (RFC 6901) that the read of a write legitimately keeps (a
	// Create-only spec change, docs/day2.md): the round trip ignores them and what is below.
	ReadKeeps []string `json:"readKeeps,omitempty"`
	// NoRoundTrip turns the round trip off for this case.
	NoRoundTrip bool `json:"noRoundTrip,omitempty"`
}

// The transports a test file's config may be served by (File.Transport).
const (
	TransportVCluster  = "vcluster"
	TransportAdmission = "admission"
)

// ErrInvalid is wrapped by every error about a test file (exit code 2).
var ErrInvalid = errors.New("invalid test file")

// load reads and checks the test file at path: strict YAML (an unknown or misspelt key is an
// error naming its path and the keys valid there: decodeFile), one of config and values,
// unique case names, valid hook types and match modes, an object per case. Errors wrap ErrInvalid and name the file and the key.
// The file, and every file it names, is read through root: one outside it is refused
// (ErrOutside).
func load(root *fileRoot, path string) (*File, error) {
	data, err := root.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	f := &File{path: path, dir: filepath.Dir(path), root: root}
	if err := decodeFile(data, f); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalid, path, err)
	}
	bad := func(key, format string, a ...any) error {
		return fmt.Errorf("%w %s: %s: %s", ErrInvalid, path, key, fmt.Sprintf(format, a...))
	}
	if string(f.Config) == "null" {
		f.Config = nil
	}
	if len(f.Config) > 0 && f.Config[0] != '"' && f.Config[0] != '{' {
		return nil, bad("config", "a file name or the config inline (a mapping with hooks:), not %.40s", f.Config)
	}
	if len(f.Config) > 0 && f.Values != "" {
		return nil, bad("values", "set config or values, not both")
	}
	if f.ConfigError != "" && len(f.Cases) > 0 {
		return nil, bad("cases", "a file whose config must be refused (configError) has no cases")
	}
	if f.ConfigError == "" && len(f.Cases) == 0 {
		return nil, bad("cases", "at least one case")
	}
	switch f.Transport {
	case "", TransportVCluster:
		f.Transport = TransportVCluster
	case TransportAdmission:
		if f.Values != "" {
			return nil, bad("transport", "admission, but values: is a vcluster config (plugin.yaml)")
		}
	default:
		return nil, bad("transport", "%q: want %s (default) or %s", f.Transport, TransportVCluster, TransportAdmission)
	}
	seen := map[string]int{}
	for i := range f.Cases {
		c := &f.Cases[i]
		key := fmt.Sprintf("cases[%d]", i)
		if c.Name == "" {
			return nil, bad(key+".name", "required")
		}
		if j, dup := seen[c.Name]; dup {
			return nil, bad(key+".name", "%q is cases[%d].name already", c.Name, j)
		}
		seen[c.Name] = i
		c.Type = cmp.Or(c.Type, string(hooks.CreatePhysical))
		if _, err := hooks.ParseHookType(c.Type); err != nil {
			return nil, bad(key+".type", "%v", err)
		}
		if len(c.Object) == 0 || string(c.Object) == "null" {
			return nil, bad(key+".object", "required: a file or the object inline")
		}
		if len(c.OldObject) > 0 && string(c.OldObject) != "null" {
			switch t := hooks.HookType(c.Type); {
			case f.Transport != TransportAdmission:
				return nil, bad(key+".oldObject", "vcluster sends no old object (its plugin protocols carry the object only), so hooks of a vcluster config never see one; "+
					"give oldObject in a file with transport: admission (synchook serve, where kube-apiserver sends the stored object on UPDATE)")
			case t.Op() != hooks.OpUpdate:
				return nil, bad(key+".oldObject", "on an Update type only (kube-apiserver sends it on UPDATE; a DELETE's object is the stored object), not %s", t)
			}
		}
		if m := c.Expect.Match; m != "" && m != "exact" && m != "subset" {
			return nil, bad(key+".expect.match", "%q: want exact or subset", m)
		}
		if c.Expect.Error != "" && len(c.Expect.Object) > 0 {
			return nil, bad(key+".expect", "an error and an object: a failing request gives no object")
		}
		for j, p := range c.Expect.ReadKeeps {
			if !strings.HasPrefix(p, "/") {
				return nil, bad(fmt.Sprintf("%s.expect.readKeeps[%d]", key, j), "%q is not a JSON Pointer (starts with /)", p)
			}
		}
	}
	return f, nil
}

// objectJSON returns the JSON object raw names: a file relative to the test file (YAML or JSON,
// read through f.root), or the object inline; key names it for errors.
func (f *File) objectJSON(raw json.RawMessage, key string) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, fmt.Errorf("%w %s: %s: %w", ErrInvalid, f.path, key, err)
		}
		data, err := f.root.ReadFile(filepath.Join(f.dir, name))
		if err != nil {
			return nil, fmt.Errorf("%w %s: %s: %w", ErrInvalid, f.path, key, err)
		}
		if raw, err = yaml.YAMLToJSONStrict(data); err != nil { // a repeated key is an error, as in kubectl
			return nil, fmt.Errorf("%w %s: %s: %s: %w", ErrInvalid, f.path, key, name, err)
		}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%w %s: %s: not an object", ErrInvalid, f.path, key)
	}
	return raw, nil
}
