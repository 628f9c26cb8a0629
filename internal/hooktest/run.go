package hooktest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/hoststore"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undo"
)

// Options are how Run runs test files.
type Options struct {
	// Register adds a program's own Go hooks to each registry (package plugin's registered
	// hooks), after the config's.
	Register func(*engine.Registry) error
	// Update rewrites the expected objects kept in files with what the cases give: existing
	// regular files inside the test file's directory only (writeInside); any other is an
	// invalid test file.
	Update bool
	// Timeout bounds each request. Default 10 s.
	Timeout time.Duration
	// Root is the directory every file is read in (the test files and every file they name,
	// config policyFiles included), through an os.Root: a path outside it, or a symbolic link
	// out of it, is refused (ErrOutside, exit 2) before anything of the file is read.
	// Default the working directory.
	Root string
}

// Result is the outcome of one case (or of a file's config, or of a skipped file).
type Result struct {
	File, Case string
	// Skipped says why the file did not run (its RequireHooks are not in this binary).
	Skipped string
	// Updated: the case's expected object file was rewritten (Options.Update).
	Updated bool
	// Failure says why the case failed ("" when it passed); Diff is the unified YAML diff under
	// it ("--- expected" / "+++ got", or "--- sent" / "+++ read" for the round trip).
	Failure, Diff string
	// Refused is the error of a file that did not run: invalid, or a config the server
	// would refuse to start with (Main's exit 2; a JUnit error, not a failure).
	Refused  string
	Duration time.Duration
}

// Passed reports whether the case passed.
func (r Result) Passed() bool { return r.Failure == "" && r.Refused == "" }

// RunFile runs the cases of f. Errors are those of an invalid file or config (not of a case).
func RunFile(ctx context.Context, f *File, opts Options) ([]Result, error) {
	opts.Timeout = cmp.Or(max(opts.Timeout, 0), 10*time.Second)
	name := cmp.Or(f.Name, f.path)
	start := time.Now()
	reg, err := f.registry(ctx, opts)
	if f.ConfigError != "" {
		r := Result{File: name, Case: "config is refused", Duration: time.Since(start)}
		switch {
		case err == nil:
			r.Failure = fmt.Sprintf("the config was accepted, want an error containing %q", f.ConfigError)
		case !strings.Contains(err.Error(), f.ConfigError):
			r.Failure = fmt.Sprintf("the config was refused with\n  %v\nwant an error containing %q", err, f.ConfigError)
		}
		return []Result{r}, nil
	}
	if err != nil {
		return nil, err
	}
	if missing := missingHooks(reg, f.RequireHooks); len(missing) > 0 {
		return []Result{{File: name, Case: "(all cases)", Skipped: fmt.Sprintf("this binary has no Go hook %s: run the program that has it (go run . test)", strings.Join(missing, ", "))}}, nil
	}
	lookup := fileNamespaces{namespaces.Static{}}
	for i := range f.Namespaces {
		lookup.Static[f.Namespaces[i].Name] = &f.Namespaces[i]
	}
	ctx = namespaces.WithSource(ctx, namespaces.Source{Lookup: lookup, Virtual: f.VirtualNamespaces})
	var out []Result
	for i := range f.Cases {
		c := &f.Cases[i]
		start := time.Now()
		r := Result{File: name, Case: c.Name}
		failure, diff, err := f.runCase(ctx, reg, i, opts)
		if errors.Is(err, errUpdated) {
			r.Updated, err = true, nil
		}
		if err != nil {
			return nil, err
		}
		r.Failure, r.Diff, r.Duration = failure, diff, time.Since(start)
		out = append(out, r)
	}
	return out, nil
}

// registry builds the registry of f's config and opts.Register through the load path every
// command that runs hooks takes (sidecar.RegistryOf: the server's checks, its idempotency
// self-test included, so a config that passes its tests starts), undo on and sealed with a
// throwaway key, provenance as the config says (compared without the build version).
func (f *File) registry(ctx context.Context, opts Options) (*engine.Registry, error) {
	cfg := &config.Config{}
	// config.Load as every command reads its config, with the config file and the policyFiles
	// it names read through the root
	reader := config.Reader{ReadFile: f.root.ReadFile}
	switch {
	case len(f.Config) > 0 && f.Config[0] == '{': // inline: no directory, a relative file is refused
		var err error
		if cfg, err = reader.Parse(f.Config); err != nil {
			return nil, configErr(f, "config", err)
		}
	case len(f.Config) > 0:
		var name string
		if err := json.Unmarshal(f.Config, &name); err != nil {
			return nil, fmt.Errorf("%w %s: config: %w", ErrInvalid, f.path, err)
		}
		var err error
		if cfg, _, err = reader.Load(filepath.Join(f.dir, name), nil); err != nil {
			if !errors.Is(err, config.ErrInvalid) { // the file cannot be read
				return nil, fmt.Errorf("%w %s: config: %w", ErrInvalid, f.path, err)
			}
			return nil, configErr(f, "config", err)
		}
	case f.Values != "":
		envVar, text, err := f.valuesConfig()
		if err != nil {
			return nil, err
		}
		// As vcluster hands it over, with no directory: the plugin v2 gets the YAML in
		// PLUGIN_CONFIG (and reads SYNCHOOK_CONFIG when that is empty), the v1 sidecar in its
		// env var SYNCHOOK_CONFIG.
		pluginEnv := func(name string) string {
			if name == envVar {
				return text
			}
			return ""
		}
		var src config.Source
		if cfg, src, err = reader.Load("", pluginEnv, bridgev2.ConfigEnvVar, config.EnvVar); err != nil {
			return nil, configErr(f, "values", err)
		}
		if src.Kind == config.SourceDefault && opts.Register != nil {
			cfg = &config.Config{} // a program with Go hooks runs no default (sidecar.NoDefaultConfig)
		}
	}
	if err := f.addClusterObjects(cfg); err != nil {
		return nil, err
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		return nil, err
	}
	reg, err := sidecar.RegistryOf(ctx, cfg, sidecar.RegistryConfig{
		Keys: undo.NewKeeper(ring), Version: testVersion, Register: opts.Register,
	})
	if err != nil {
		return nil, configErr(f, "config", err)
	}
	return reg, nil
}

// addClusterObjects gives cfg's policy entries the file's params (every entry) and bindings
// (the entry of the policy each names), each a file or inline (objectJSON) and named "the test
// file's params[i]" ("bindings[i]") in the config's errors. Either with no policy entry to
// take them makes the file invalid.
func (f *File) addClusterObjects(cfg *config.Config) error {
	for _, l := range []struct {
		key  string
		raws []json.RawMessage
		add  func([][]byte, []string)
	}{{"params", f.Params, cfg.AddParams}, {"bindings", f.Bindings, cfg.AddBindings}} {
		if len(l.raws) == 0 {
			continue
		}
		if !slices.ContainsFunc(cfg.Hooks, func(h config.Hook) bool { return h.Policy != nil || h.PolicyFile != "" }) {
			return fmt.Errorf("%w %s: %s: the config has no policy entry (policy: or policyFile:) to give them to", ErrInvalid, f.path, l.key)
		}
		objs := make([][]byte, len(l.raws))
		where := make([]string, len(l.raws))
		for i, raw := range l.raws {
			key := fmt.Sprintf("%s[%d]", l.key, i)
			data, err := f.objectJSON(raw, key)
			if err != nil {
				return err
			}
			objs[i], where[i] = data, "the test file's "+key
		}
		l.add(objs, where)
	}
	return nil
}

// missingHooks returns the names of want that no chain of reg holds.
func missingHooks(reg *engine.Registry, want []string) []string {
	have := map[string]bool{}
	for _, rc := range reg.Capabilities().Resources {
		for _, ht := range rc.HookTypes {
			for _, h := range ht.Hooks {
				have[h] = true
			}
		}
	}
	var missing []string
	for _, h := range want {
		if !have[h] {
			missing = append(missing, h)
		}
	}
	return missing
}

// testVersion is the build version provenance marks carry in tests (stripped when compared).
const testVersion = "test"

// configErr is a refused config: an invalid test file unless the file expects it.
func configErr(f *File, key string, err error) error {
	if f.ConfigError != "" {
		return err
	}
	return fmt.Errorf("%w %s: %s: %w", ErrInvalid, f.path, key, err)
}

// runCase runs case i: the write (or read) of its type, the expectation, and for a write the
// round trip. It returns the failure and diff ("" when it passed); err for an invalid case.
func (f *File) runCase(ctx context.Context, reg *engine.Registry, i int, opts Options) (failure, diff string, err error) {
	c := &f.Cases[i]
	key := fmt.Sprintf("cases[%d]", i)
	in, err := f.objectJSON(c.Object, key+".object")
	if err != nil {
		return "", "", err
	}
	gvk, err := engine.ObjectGVK(in)
	if err != nil {
		return "", "", fmt.Errorf("%w %s: %s.object: %w", ErrInvalid, f.path, key, err)
	}
	// Never a Secret value in what is printed: the diffs show them redacted (secretsRedacted),
	// and, as a second line, the texts of the object's values are scrubbed from the failure
	// (a request's error) and the diff (a hook that copies a value into another field).
	defer func() {
		failure, diff = capture.ScrubText(gvk, in, failure), capture.ScrubText(gvk, in, diff)
	}()
	t := hooks.HookType(c.Type)
	var old []byte
	if len(c.OldObject) > 0 && string(c.OldObject) != "null" {
		if old, err = f.objectJSON(c.OldObject, key+".oldObject"); err != nil {
			return "", "", err
		}
	}
	res, runErr := mutate(ctx, reg, gvk, t, in, old, opts.Timeout)
	if c.Expect.Error != "" {
		switch {
		case runErr == nil:
			return fmt.Sprintf("the request succeeded, want an error containing %q", c.Expect.Error), "", nil
		case !strings.Contains(runErr.Error(), c.Expect.Error):
			return fmt.Sprintf("the request failed with\n  %v\nwant an error containing %q", runErr, c.Expect.Error), "", nil
		}
		return "", "", nil
	}
	if runErr != nil {
		return fmt.Sprintf("the request failed: %v", runErr), "", nil
	}
	if len(c.Expect.Object) > 0 {
		if failure, diff, err := f.compareExpected(reg, c, key, gvk, t, res, opts.Update); err != nil || failure != "" {
			return failure, diff, err
		}
	}
	if read, write := t.ReadOf(); write && !c.Expect.NoRoundTrip {
		// The read runs on what the host stores (package hoststore's model of the apiserver:
		// empty maps and lists dropped, a Create's creationTimestamp its own), and what the
		// syncer sent is compared as stored too.
		sentRaw := in
		if t.Op() == hooks.OpCreate {
			now := time.Now()
			res, sentRaw = hoststore.Created(res, now), hoststore.Created(in, now)
		}
		stored, err := hoststore.Store(gvk, res)
		if err != nil {
			return fmt.Sprintf("the host would refuse what the write gave: %v", err), "", nil
		}
		back, err := mutate(ctx, reg, gvk, read, stored, nil, opts.Timeout)
		if err != nil {
			return fmt.Sprintf("the read (%s) of what the host stores failed: %v", read, err), "", nil
		}
		sent, err := hoststore.Store(gvk, sentRaw)
		if err != nil {
			return fmt.Sprintf("the host would refuse the object the syncer sends: %v", err), "", nil
		}
		if back, err = hoststore.Store(gvk, back); err != nil { // as the syncer decodes it
			return fmt.Sprintf("the read (%s) gives an object the syncer cannot decode: %v", read, err), "", nil
		}
		if d := roundTripDiff(gvk, sent, back, c.Expect.ReadKeeps); d != "" {
			if only := createOnly(reg, gvk, t); len(only) > 0 {
				return fmt.Sprintf("the read (%s) does not give the syncer back what it sent: %s run on %s but not on %s, "+
					"and a read keeps a Create-only change (the syncer's updates would never make it again). "+
					"The usual fix: list %s in their types too (UPDATE in a policy's rules); "+
					"or declare the kept paths in expect.readKeeps (docs/day2.md#what-each-operation-does) (-sent +read)",
					read, strings.Join(only, ", "), t, t.UpdateOf(), t.UpdateOf()), d, nil
			}
			return fmt.Sprintf("the read (%s) does not give the syncer back what it sent: a trace of the hooks stays (declare what a read legitimately keeps in expect.readKeeps) (-sent +read)", read), d, nil
		}
	}
	return "", "", nil
}

// compareExpected compares the result res of case c with its expected object; with update, an
// expected object kept in a file is rewritten with the result instead of failing.
func (f *File) compareExpected(reg *engine.Registry, c *Case, key string, gvk schema.GroupVersionKind, t hooks.HookType, res []byte, update bool) (failure, diff string, err error) {
	want, err := f.objectJSON(c.Expect.Object, key+".expect.object")
	if err != nil {
		return "", "", err
	}
	wantV, err := jsondoc.Decode(want)
	if err != nil {
		return "", "", fmt.Errorf("%w %s: %s.expect.object: %w", ErrInvalid, f.path, key, err)
	}
	got, err := comparable(reg, gvk, t, res, hasUndo(wantV))
	if err != nil {
		return fmt.Sprintf("the undo on the result does not open: %v", err), "", nil
	}
	normalizeProvenance(wantV)
	subset := c.Expect.Match == "subset"
	if d := diffValues(gvk, wantV, got, subset); d != "" {
		if update && c.Expect.Object[0] == '"' {
			return "", "", f.writeExpected(c, key, got)
		}
		how := "the result is not the expected object"
		if subset {
			how = "the result does not contain the expected fields"
		}
		return how + " (-expected +got)", d, nil
	}
	return "", "", nil
}

// createOnly returns the hooks of gvk's chain of t that its side's Update chain does not hold:
// for a Create t, the hooks whose change a read keeps (docs/day2.md); nil for any other t.
func createOnly(reg *engine.Registry, gvk schema.GroupVersionKind, t hooks.HookType) []string {
	if t.Op() != hooks.OpCreate {
		return nil
	}
	update := t.UpdateOf()
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	chains := map[hooks.HookType][]string{}
	for _, rc := range reg.Capabilities().Resources {
		if rc.APIVersion == apiVersion && rc.Kind == kind {
			for _, ht := range rc.HookTypes {
				chains[ht.Type] = ht.Hooks
			}
		}
	}
	var out []string
	for _, h := range chains[t] {
		if h != undo.Annotation && !slices.Contains(chains[update], h) {
			out = append(out, h)
		}
	}
	return out
}

// mutate runs the chain of t on raw, with the request's old object (nil: none, as the
// admission endpoint passes kube-apiserver's request.oldObject of an UPDATE), and returns the
// resulting object.
func mutate(ctx context.Context, reg *engine.Registry, gvk schema.GroupVersionKind, t hooks.HookType, raw, old []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := reg.MutateWithOptions(ctx, gvk, t, raw, engine.MutateOptions{OldObject: old})
	if err != nil {
		return nil, err
	}
	return res.Object()
}

// writeExpected writes got, as YAML, to the file that case c's expected object is kept in.
func (f *File) writeExpected(c *Case, key string, got any) error {
	var name string
	if err := json.Unmarshal(c.Expect.Object, &name); err != nil {
		return fmt.Errorf("%w %s: %s.expect.object: %w", ErrInvalid, f.path, key, err)
	}
	out, err := yaml.Marshal(got)
	if err != nil {
		return err
	}
	if err := writeInside(f.dir, name, out); err != nil {
		return fmt.Errorf("%w %s: %s.expect.object: %s: --update writes only regular files inside the test file's directory (%s): %w", ErrInvalid, f.path, key, name, f.dir, err)
	}
	return errUpdated
}

// writeInside replaces the content of the existing regular file name (relative to dir, as the
// case read it: filepath.Join) with data, through an os.Root on dir: a name that leaves dir by
// ".." or by a symbolic link (the file's or a parent directory's) is refused, and so is
// anything but a regular file (a directory, a device, a fifo: opened without blocking and
// checked before anything is written). The file is not created: the case read it.
func writeInside(dir, name string, data []byte) error {
	rel, err := filepath.Rel(dir, filepath.Join(dir, name))
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	st, err := root.Stat(rel)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (mode %s)", rel, st.Mode().Type())
	}
	file, err := root.OpenFile(rel, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer file.Close()
	// what was opened, should rel have been replaced since the Stat
	if st, err = file.Stat(); err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (mode %s)", rel, st.Mode().Type())
	}
	if err := file.Truncate(0); err != nil {
		return err
	}
	if _, err := file.Write(data); err != nil {
		return err
	}
	return file.Close()
}

// errUpdated is runCase's answer for a case whose expected object file it rewrote.
var errUpdated = errors.New("expected object updated")

// fileNamespaces are a test file's namespaces: a namespace it does not list does not exist (a
// hook that reads it fails the case's request, as under vcluster), and the error says where
// to list it.
type fileNamespaces struct{ namespaces.Static }

// Get implements namespaces.Lookup.
func (n fileNamespaces) Get(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := n.Static.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%w (the test file's namespaces: does not list it)", err)
	}
	return ns, nil
}
