package builtin

import (
	"context"
	"maps"

	"github.com/synchook/synchook/hooks"
)

// LabelsMetadataFunc is LabelsFunc on hooks.Metadata: the labels hook's change made from the
// labels and annotations alone, for the registry's label/annotation fast path.
func LabelsMetadataFunc(l Labels) hooks.MetadataFunc {
	add := [2]map[string]string{maps.Clone(l.Labels), maps.Clone(l.Annotations)}
	return func(_ context.Context, m *hooks.Metadata) error {
		for i, dst := range []*map[string]string{&m.Labels, &m.Annotations} {
			if len(add[i]) == 0 {
				continue
			}
			if *dst == nil {
				*dst = make(map[string]string, len(add[i]))
			}
			maps.Copy(*dst, add[i])
		}
		return nil
	}
}

// StripMetadataFunc is StripFunc on hooks.Metadata when every path of s is a label or an
// annotation key (/metadata/labels/<key>, /metadata/annotations/<key>); ok is false otherwise,
// and for paths that do not parse (StripFunc reports those).
func StripMetadataFunc(s Strip) (fn hooks.MetadataFunc, ok bool) {
	type target struct {
		annotations bool
		key         string
	}
	var targets []target
	for _, p := range s.Paths {
		tokens, err := parseStripPath(p)
		if err != nil || len(tokens) != 3 || tokens[0] != "metadata" || (tokens[1] != "labels" && tokens[1] != "annotations") {
			return nil, false
		}
		targets = append(targets, target{tokens[1] == "annotations", tokens[2]})
	}
	return func(_ context.Context, m *hooks.Metadata) error {
		for _, t := range targets {
			if t.annotations {
				delete(m.Annotations, t.key)
			} else {
				delete(m.Labels, t.key)
			}
		}
		return nil
	}, true
}

// FilteredMetadata is Filtered for a MetadataFunc: fn runs only for objects f matches, judged
// on the namespace and the labels as they are when it runs.
func FilteredMetadata(f Filter, fn hooks.MetadataFunc) (hooks.MetadataFunc, error) {
	matches, err := f.matcher()
	if err != nil || matches == nil {
		return fn, err
	}
	return func(ctx context.Context, m *hooks.Metadata) error {
		if !matches(m.Namespace, m.Labels) {
			return nil
		}
		return fn(ctx, m)
	}, nil
}
