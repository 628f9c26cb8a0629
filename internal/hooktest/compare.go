package hooktest

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/yamldiff"
	"github.com/synchook/synchook/patch"
)

// hasUndo reports whether the object v carries a synchook.io/undo annotation.
func hasUndo(v any) bool {
	_, ok := annotations(v)[undo.Annotation]
	return ok
}

// annotations returns metadata.annotations of the object v (nil when it has none).
func annotations(v any) map[string]any {
	obj, _ := v.(map[string]any)
	meta, _ := obj["metadata"].(map[string]any)
	a, _ := meta["annotations"].(map[string]any)
	return a
}

// comparable returns the object raw (the result of hook type t) as compared with an expected
// object: its synchook.io/undo replaced by the undo's opened entries as JSON text when
// withUndo, else removed (an annotations map left empty by that goes too); provenance without
// the build version.
func comparable(reg *engine.Registry, gvk schema.GroupVersionKind, t hooks.HookType, raw []byte, withUndo bool) (any, error) {
	v, err := jsondoc.Decode(raw)
	if err != nil {
		return nil, err
	}
	if a := annotations(v); a != nil {
		if _, ok := a[undo.Annotation]; ok {
			if withUndo {
				entries, _, err := reg.OpenedUndo(gvk, t, raw)
				if err != nil {
					return nil, err
				}
				text, err := json.Marshal(entries)
				if err != nil {
					return nil, err
				}
				a[undo.Annotation] = string(text)
			} else {
				delete(a, undo.Annotation)
				if len(a) == 0 {
					delete(v.(map[string]any)["metadata"].(map[string]any), "annotations")
				}
			}
		}
	}
	normalizeProvenance(v)
	return v, nil
}

// provenanceVersion is the "@version" of a provenance mark ("hook@version#sha").
var provenanceVersion = regexp.MustCompile(`@[^#,]*#`)

// normalizeProvenance removes the build version from the object v's synchook.io/mutated-by.
func normalizeProvenance(v any) {
	a := annotations(v)
	if s, ok := a[undo.ProvenanceAnnotation].(string); ok {
		a[undo.ProvenanceAnnotation] = provenanceVersion.ReplaceAllString(s, "#")
	}
}

// diffValues returns "" when got is want (subset: when got has every field of want with its
// value, lists of one length element by element), else the unified YAML diff from want to got
// (yamldiff, the diff synchook replay prints), headed "--- expected" and "+++ got", of objects
// of kind gvk shown redacted (secretsRedacted). want and got are left as they are.
func diffValues(gvk schema.GroupVersionKind, want, got any, subset bool) string {
	if subset {
		got = restrict(got, want)
	}
	if reflect.DeepEqual(want, got) {
		return ""
	}
	if d := yamldiff.Values(secretsRedacted(gvk, want), secretsRedacted(gvk, got), "expected", "got"); d != "" {
		return d
	}
	return "(the values differ in a way their YAML does not show)" // e.g. a number's spelling
}

// restrict returns the part of got that want names: for maps the keys of want (a key got
// lacks stays absent), for lists of one length each element restricted; anything else is got.
func restrict(got, want any) any {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got
		}
		out := map[string]any{}
		for k, wv := range w {
			if gv, ok := g[k]; ok {
				out[k] = restrict(gv, wv)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return got
		}
		out := make([]any, len(g))
		for i := range g {
			out[i] = restrict(g[i], w[i])
		}
		return out
	}
	return got
}

// roundTripDiff returns "" when back (what the read gives the syncer) is sent (what the syncer
// sent for the write) but at the paths keeps names, else the unified YAML diff from sent to
// read, headed "--- sent" and "+++ read", of objects of kind gvk shown redacted
// (secretsRedacted).
func roundTripDiff(gvk schema.GroupVersionKind, sent, back []byte, keeps []string) string {
	s, err := jsondoc.Decode(sent)
	if err != nil {
		return err.Error()
	}
	b, err := jsondoc.Decode(back)
	if err != nil {
		return err.Error()
	}
	for _, k := range keeps {
		tokens, err := patch.ParsePointer(k)
		if err != nil {
			continue // load checked the form
		}
		removeAt(s, tokens)
		removeAt(b, tokens)
	}
	// synchook's own undo annotation: a read that keeps an entry (a Create-only change) hands
	// the syncer the undo too, which its next write opens (docs/day2.md); the entries are what
	// counts, and they show as the fields they keep.
	for _, v := range []any{s, b} {
		if a := annotations(v); a != nil {
			delete(a, undo.Annotation)
			if len(a) == 0 {
				delete(v.(map[string]any)["metadata"].(map[string]any), "annotations")
			}
		}
	}
	if reflect.DeepEqual(s, b) {
		return ""
	}
	if d := yamldiff.Values(secretsRedacted(gvk, s), secretsRedacted(gvk, b), "sent", "read"); d != "" {
		return d
	}
	return "(the objects differ in a way their YAML does not show)"
}

// secretsRedacted returns a copy of v, an object of kind gvk as a case shows it, whose Secret
// values (data, stringData, and those in the undo's opened entries and in kubectl's
// last-applied annotation) are redacted as capture redacts them (capture.RedactValue: a keyed
// MAC, so that equal values show equal and a diff names the key that differs but no value).
// Other kinds show as they are: synchook test never prints a Secret value.
func secretsRedacted(gvk schema.GroupVersionKind, v any) any {
	j, err := json.Marshal(v)
	if err != nil {
		return "(a Secret that does not encode as JSON: not shown)"
	}
	c, err := jsondoc.Decode(j)
	if err != nil {
		return "(a Secret that does not decode: not shown)"
	}
	return capture.RedactValue(gvk, c)
}

// removeAt removes the value at tokens below v (maps only, and list indexes), if any.
func removeAt(v any, tokens []string) {
	for i, tok := range tokens {
		last := i == len(tokens)-1
		switch x := v.(type) {
		case map[string]any:
			if last {
				delete(x, tok)
				return
			}
			v = x[tok]
		case []any:
			n, err := strconv.Atoi(tok) // RFC 6901: digits only
			if err != nil || tok[0] < '0' || tok[0] > '9' || n >= len(x) {
				return
			}
			if last {
				x[n] = nil
				return
			}
			v = x[n]
		default:
			return
		}
	}
}
