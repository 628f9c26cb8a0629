// Package capture records a sample of the requests a synchook server answers, one JSON file
// per request, and replays them against another build or config to show what it would
// change (synchook serve --capture DIR, synchook replay DIR).
//
// Secret values never reach the disk: in a v1 Secret (or each item of a v1 SecretList) every
// value of data and stringData, in the object and in the patch's values, the Secret values
// recorded in the synchook.io/undo annotation and the kubectl.kubernetes.io/last-applied-
// configuration annotation are replaced by "hmac-sha256:<hex>", the HMAC-SHA256 of the value
// (for data: of the decoded bytes) under a key that each process makes at random when it
// starts and never writes anywhere. Without the key, a capture file does not let anyone check
// a guess of a value (as an unkeyed hash of a weak password would); the price is that the
// same value captured by two processes (or before and after a restart) has two different
// texts, so replay in another process reports a hook that writes a new Secret value as
// different. Within one process, equal values have equal texts. A hook's error on a Secret
// reaches capture already withheld (failure.WithheldError); error messages also have the
// values that appear as they are or Go-quoted scrubbed.
package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
)

// FormatVersion is the Record.Format this package writes and reads.
const FormatVersion = 1

// Record is the content of one capture file: one request and what the chain answered.
type Record struct {
	// Format is FormatVersion.
	Format int `json:"format"`
	// Time is when the request was answered (RFC 3339, nanoseconds).
	Time time.Time `json:"time"`
	// SynchookVersion is the version of the build that answered (plugin.Version()).
	SynchookVersion string `json:"synchookVersion"`
	// HookType, APIVersion and Kind say which chain ran.
	HookType   hooks.HookType `json:"hookType"`
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	// Hooks names the chain's hooks in order (as GET /capabilities lists them; the item
	// kind's chain for a list).
	Hooks []string `json:"hooks"`
	// HooksRun is the number of hooks that ran (engine.Result.Hooks).
	HooksRun int `json:"hooksRun"`
	// Object is the object as received (JSON), Secret values redacted.
	Object json.RawMessage `json:"object"`
	// Patch is the JSON Patch answered, Secret values redacted; null when nothing changed or
	// the chain failed.
	Patch json.RawMessage `json:"patch"`
	// Error is the chain's error message when it failed (for a Secret, a hook's own message
	// withheld); empty on success.
	Error string `json:"error,omitempty"`
}

// GVK returns the record's GroupVersionKind.
func (r *Record) GVK() (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", r.APIVersion, err)
	}
	if gv.Version == "" || r.Kind == "" {
		return schema.GroupVersionKind{}, errors.New("no apiVersion and kind")
	}
	return gv.WithKind(r.Kind), nil
}

// fileName matches the names of the files a Writer writes: a UTC timestamp to the nanosecond
// and a counter, so that name order is write order.
var fileName = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z-[0-9]{6,}\.json$`)

// nameFor returns the file name for the n-th record written at t.
func nameFor(t time.Time, n uint64) string {
	return fmt.Sprintf("%s-%06d.json", t.UTC().Format("20060102T150405.000000000Z"), n)
}

// Files returns the paths of the capture files in dir (every *.json not starting with "."),
// in name order, which is the order they were written in.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	slices.Sort(out)
	return out, nil
}

// ParseRecord decodes and checks the content of one capture file: format, hook type, GVK, an
// object and a patch that is null or an array.
func ParseRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("not a capture record: %w", err)
	}
	if r.Format != FormatVersion {
		return nil, fmt.Errorf("format %d, want %d", r.Format, FormatVersion)
	}
	if !r.HookType.Valid() {
		return nil, fmt.Errorf("hookType %q: valid: %s", r.HookType, hooks.ValidHookTypes())
	}
	if _, err := r.GVK(); err != nil {
		return nil, err
	}
	if len(r.Object) == 0 || r.Object[0] != '{' {
		return nil, errors.New("object is not a JSON object")
	}
	if p := string(r.Patch); p == "null" || p == "" {
		r.Patch = nil
	} else if p[0] != '[' {
		return nil, errors.New("patch is neither null nor a JSON array")
	}
	return &r, nil
}

// chainNames returns, for every chain of reg, its hook names (Registry.Capabilities).
func chainNames(reg *engine.Registry) map[engine.Key][]string {
	out := map[engine.Key][]string{}
	if reg == nil {
		return out
	}
	for _, rc := range reg.Capabilities().Resources {
		gv, err := schema.ParseGroupVersion(rc.APIVersion)
		if err != nil {
			continue
		}
		for _, ht := range rc.HookTypes {
			out[engine.Key{GVK: gv.WithKind(rc.Kind), Type: ht.Type}] = ht.Hooks
		}
	}
	return out
}

// namesFor returns the hook names of the chain of (gvk, t) in names: the item kind's for a
// list kind without a chain of its own; never nil.
func namesFor(names map[engine.Key][]string, gvk schema.GroupVersionKind, t hooks.HookType) []string {
	if n, ok := names[engine.Key{GVK: gvk, Type: t}]; ok {
		return n
	}
	if item, ok := engine.ListItemGVK(gvk); ok {
		if n, ok := names[engine.Key{GVK: item, Type: t}]; ok {
			return n
		}
	}
	return []string{}
}
