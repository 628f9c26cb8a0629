package capture

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/yamldiff"
	"github.com/synchook/synchook/patch"
)

// Replayer runs captured requests through the chains of a registry and compares the outcome
// with the captured one.
type Replayer struct {
	reg     *engine.Registry
	names   map[engine.Key][]string
	timeout time.Duration

	// ForeignKey says that the registry's undo key is not the one the capture was sealed
	// with (replay without --undo-key-file seals with a throwaway key): a sealed undo
	// annotation value compares equal to any other sealed value (what it holds cannot be
	// compared), and a read whose object carries a sealed undo that the replay cannot open
	// comes out Unverifiable rather than different. Default false: the capture's key.
	ForeignKey bool
}

// NewReplayer returns a Replayer for reg; each request's chain gets timeout (<= 0: 10 s).
func NewReplayer(reg *engine.Registry, timeout time.Duration) *Replayer {
	timeout = cmp.Or(max(timeout, 0), 10*time.Second)
	return &Replayer{reg: reg, names: chainNames(reg), timeout: timeout}
}

// Outcome is the result of replaying one record.
type Outcome struct {
	// Equal is true when both runs give the same object (compared semantically, as JSON
	// values), or both fail with the same message.
	Equal bool
	// Captured and Replayed are the resulting objects (the captured object with the captured,
	// respectively the new, patch applied; Secret values redacted), nil for a side that failed.
	Captured, Replayed []byte
	// CapturedError and ReplayedError are the chains' error messages, empty on success.
	CapturedError, ReplayedError string
	// Hooks are the hooks the outcome is counted for: those named in the record, followed by
	// those of the current chain not named there (a new hook).
	Hooks []string
	// Diff is a unified diff of the two outcomes rendered as YAML, empty when Equal.
	Diff string
	// Unverifiable is true, with Equal false, for a read (GetPhysical, GetVirtual) of an
	// object carrying a sealed undo, replayed by a Replayer with ForeignKey whose outcome is
	// not the captured one: without the capture's key the undo cannot open, so the difference
	// says nothing about the hooks. Diff is set as for a difference.
	Unverifiable bool
}

// Replay runs the chain of rec's hook type and kind on rec's object and compares the result
// with the captured one. The comparison is on the resulting objects, not on the patches: the
// captured patch and the new patch are each applied to the captured object and the two
// results compared as JSON values, so that two patches that write the same object in another
// way (operation order, add vs replace) are equal.
//
// In a Secret the hooks see "hmac-sha256:<hex>" where the real value was (the capture holds
// no more); a hook whose result depends on a Secret value, or that writes a new Secret value,
// is reported different (a value is keyed by the process that redacts it, so the capturing
// and the replaying process never give one value the same text). A hook's failure on a Secret
// is compared without its detail (failure.WithheldError), which is keyed per process too. An
// error is returned when the record cannot be replayed: its patch does not apply to its
// object.
func (p *Replayer) Replay(ctx context.Context, rec *Record) (*Outcome, error) {
	gvk, err := rec.GVK()
	if err != nil {
		return nil, err
	}
	out := &Outcome{CapturedError: rec.Error}
	out.Hooks = slices.Clone(rec.Hooks)
	for _, h := range namesFor(p.names, gvk, rec.HookType) {
		if !slices.Contains(out.Hooks, h) {
			out.Hooks = append(out.Hooks, h)
		}
	}
	if rec.Error == "" {
		if out.Captured, err = patch.Apply(rec.Object, rec.Patch); err != nil {
			return nil, fmt.Errorf("the captured patch does not apply to the captured object: %w", err)
		}
	}
	object, err := mapObject(gvk, rec.Object, placeholderMapper)
	if err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, err := p.reg.Mutate(ctx, gvk, rec.HookType, object)
	if err == nil {
		var hooked []byte
		if hooked, err = res.Object(); err == nil {
			out.Replayed, err = mapObject(gvk, hooked, rehashMapper)
		}
	}
	if err != nil {
		out.ReplayedError = scrub(err.Error(), secretTexts(gvk, object))
	}

	captured, replayed := out.Captured, out.Replayed
	switch {
	case out.CapturedError != "" || out.ReplayedError != "":
		out.Equal = sameError(out.CapturedError, out.ReplayedError)
	default:
		var x, y any
		if x, err = p.comparable(gvk, rec.HookType, out.Captured); err != nil {
			return nil, err
		}
		if y, err = p.comparable(gvk, rec.HookType, out.Replayed); err != nil {
			return nil, err
		}
		out.Equal = reflect.DeepEqual(x, y)
		if !p.ForeignKey { // the diff shows what the undos hold, as compared
			captured, _ = encodeJSON(x)
			replayed, _ = encodeJSON(y)
		}
	}
	if !out.Equal {
		out.Diff = diff(render(captured, out.CapturedError), render(replayed, out.ReplayedError))
		out.Unverifiable = p.ForeignKey && rec.HookType.Reads() && carriesSealedUndo(rec.Object)
	}
	return out, nil
}

// comparable returns the resulting object raw of the chain t on kind gvk (a list: each item)
// as compared: the build version left out of undo.ProvenanceAnnotation (a new build names
// itself there, and that alone is not a difference in what the hooks do), and a sealed undo
// annotation value replaced by what it holds. With the capture's key, by its entries opened
// under the one rule (engine.Registry.OpenedUndo, as `synchook test` compares an undo): a
// Create's seal carries the time it was sealed and a rotated ring seals with its newest key,
// so the same undo has another text at replay; a value that does not open stands as
// "does not open with --undo-key-file: <why>", a difference from any undo that does. With
// ForeignKey, by SealedUndo alone (what it holds cannot be compared).
func (p *Replayer) comparable(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (any, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	withoutVersion(v)
	if p.ForeignKey {
		maskSeals(v)
		return v, nil
	}
	itemGVK := gvk
	if item, ok := engine.ListItemGVK(gvk); ok && isList(v) {
		itemGVK = item
	}
	var openErr error
	eachObject(v, func(obj map[string]any) {
		meta, _ := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		u, ok := ann[undo.Annotation].(string)
		if !ok || !undo.IsSealed(u) {
			return
		}
		itemRaw, err := encodeJSON(obj)
		if err != nil {
			openErr = err
			return
		}
		entries, _, err := p.reg.OpenedUndo(itemGVK, t, itemRaw)
		if err != nil {
			ann[undo.Annotation] = "does not open with --undo-key-file: " + err.Error()
			return
		}
		text, err := json.Marshal(entries)
		if err == nil {
			ann[undo.Annotation], err = decodeJSON(text)
		}
		if err != nil {
			openErr = err
		}
	})
	return v, openErr
}

// isList reports whether the decoded object v has an items array.
func isList(v any) bool {
	obj, _ := v.(map[string]any)
	_, ok := obj["items"].([]any)
	return ok
}

// carriesSealedUndo reports whether the object JSON, or an item of a list, has a sealed undo
// annotation (in a Secret's capture: SealedUndo).
func carriesSealedUndo(object []byte) bool {
	v, err := decodeJSON(object)
	if err != nil {
		return false
	}
	found := false
	eachAnnotations(v, func(ann map[string]any) {
		u, _ := ann[undo.Annotation].(string)
		found = found || u == SealedUndo || undo.IsSealed(u)
	})
	return found
}

// eachAnnotations calls fn with the annotations map of the decoded object v, or of each item
// when v is a list (nil where an object has none).
func eachAnnotations(v any, fn func(ann map[string]any)) {
	eachObject(v, func(obj map[string]any) {
		meta, _ := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		fn(ann)
	})
}

// eachObject calls fn with the decoded object v, or with each item when v is a list (nil for
// an item that is not an object).
func eachObject(v any, fn func(obj map[string]any)) {
	obj, _ := v.(map[string]any)
	objs := []any{obj}
	if items, ok := obj["items"].([]any); ok {
		objs = items
	}
	for _, o := range objs {
		m, _ := o.(map[string]any)
		fn(m)
	}
}

// maskSeals replaces a sealed undo annotation value of the decoded object v (and of the items
// of a list) by SealedUndo: sealed under two keys, equal records have different texts.
func maskSeals(v any) {
	eachAnnotations(v, func(ann map[string]any) {
		if u, ok := ann[undo.Annotation].(string); ok && undo.IsSealed(u) {
			ann[undo.Annotation] = SealedUndo
		}
	})
}

// redactedRun is a scrubbed Secret value and what follows it up to a delimiter: the capture
// scrubbed real values, replay scrubs placeholders, and a real value that began with another
// one may have been scrubbed only in part ("[redacted]-token").
var redactedRun = regexp.MustCompile(regexp.QuoteMeta(redactedText) + `[A-Za-z0-9+/=_.-]*`)

// withheldDetail is the detail of a failure.WithheldError in a message: keyed per process.
var withheldDetail = regexp.MustCompile(`\(detail [0-9a-z]+\)`)

// sameError compares two error messages, scrubbed Secret values alike whatever their length
// and the details of withheld messages left out.
func sameError(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	norm := func(s string) string {
		return withheldDetail.ReplaceAllString(redactedRun.ReplaceAllString(s, redactedText), "(detail)")
	}
	return norm(a) == norm(b)
}

// provenanceVersion matches the "@version" of each "hook@version#sha" in the annotation.
var provenanceVersion = regexp.MustCompile(`@[^#,]*#`)

// withoutVersion drops the versions from the provenance annotation of the decoded object v.
func withoutVersion(v any) {
	obj, _ := v.(map[string]any)
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if s, ok := ann[undo.ProvenanceAnnotation].(string); ok {
		ann[undo.ProvenanceAnnotation] = provenanceVersion.ReplaceAllString(s, "@#")
	}
}

// render returns the outcome of one side as YAML, or its error.
func render(obj []byte, errText string) string {
	if errText != "" {
		return "error: " + errText + "\n"
	}
	y, err := yaml.JSONToYAML(obj)
	if err != nil {
		return string(obj) + "\n"
	}
	return string(y)
}

// diff returns the unified line diff from a (captured) to b (replayed): yamldiff.Unified, the
// diff synchook test prints too.
func diff(a, b string) string { return yamldiff.Unified(a, b, "captured", "replayed") }
