package engine

import (
	"context"
	"errors"
	"maps"

	"github.com/synchook/synchook/internal/undo"
)

// undoOnMetadata reports whether the undo read of c with plan p can take the label/annotation
// fast path: every entry addresses labels or annotations (a key, or the whole map), nothing is
// carried and the read chain's own hooks (if any) are MetadataHooks.
func (r *Registry) undoOnMetadata(c *chain, p undo.Plan) bool {
	if len(c.hooks) > 0 && !c.metadataOnly() || len(p.Carry) > 0 {
		return false
	}
	for _, s := range p.Steps {
		if s.Op != "" || len(s.Tokens) < 2 || len(s.Tokens) > 3 || s.Tokens[0] != "metadata" || mapIndex(s.Tokens[1]) < 0 {
			return false
		}
	}
	return true
}

// mapIndex is 0 for "labels", 1 for "annotations", else -1: the index in metadataDoc.maps.
func mapIndex(name string) int {
	switch name {
	case "labels":
		return 0
	case "annotations":
		return 1
	}
	return -1
}

// undoMetadata is undoView and the answer for an undo that undoOnMetadata admits, on the labels
// and annotations alone (undo.Apply on metadataMaps): no decode of the object, no JSON Patch
// apply.
// dropped says why the undo was dropped ("" when it was applied). It returns
// errNotMetadataPath for a request the fast path does not handle exactly (a repeated key, a
// null map): the caller takes the general path.
func (rn *call) undoMetadata(ctx context.Context, c *chain, raw []byte, p undo.Plan) (o outcome, dropped string, err error) {
	doc, err := c.parseMetadata(raw, rn.validJSON, rn.topOf(raw))
	if err != nil {
		return outcome{}, "", err
	}
	var stored [2]map[string]string
	for i, f := range doc.maps {
		if f.start >= 0 && f.value == nil || f.dups {
			return outcome{}, "", errNotMetadataPath
		}
		stored[i] = f.value // nil: absent
	}
	view := metadataMaps{maps.Clone(stored[0]), maps.Clone(stored[1])}
	if view[1] == nil { // undo.Apply removes the annotation first: it is there (runUndoRead)
		return outcome{}, "", errNotMetadataPath
	}
	res := undo.Apply(ctx, &view, p.Steps)
	rn.observeUndoSkipped(c.key, res.Skipped)
	dropped = res.Reason
	if dropped != "" {
		view = stored
	}
	after := [2]map[string]string(view)
	if len(c.hooks) > 0 {
		m, err := c.metadataHooked(ctx, rn, doc.namespace, after)
		if err != nil {
			return outcome{}, dropped, err
		}
		after, o.hooks = [2]map[string]string{m.Labels, m.Annotations}, len(c.hooks)
	}
	if dropped != "" && len(c.hooks) == 0 {
		return o, dropped, nil
	}
	o.ops, o.merge, err = doc.answer(after)
	return o, dropped, err
}

// metadataMaps is a Doc (package undo) of an object's labels and annotations alone, for
// undo.Apply on the fast path: entries address a key of either map or a whole map
// (undoOnMetadata admits no other); a nil map is absent. Values are strings; a whole map is a
// map[string]any of strings, as undo.Doc values are.
type metadataMaps [2]map[string]string

// at returns the map index and key (or "" for the whole map) that tokens address.
func (m *metadataMaps) at(tokens []string) (i int, key string, whole bool) {
	i = mapIndex(tokens[1])
	if len(tokens) == 2 {
		return i, "", true
	}
	return i, tokens[2], false
}

// Kind implements undo.Doc: metadata itself (one token) is always an object here.
func (m *metadataMaps) Kind(tokens []string) (byte, bool) {
	if len(tokens) == 1 {
		return '{', tokens[0] == "metadata"
	}
	i, key, whole := m.at(tokens)
	if whole {
		return '{', m[i] != nil
	}
	_, ok := m[i][key]
	return '"', ok
}

// Lookup implements undo.Doc.
func (m *metadataMaps) Lookup(tokens []string) (any, bool) {
	i, key, whole := m.at(tokens)
	if whole {
		if m[i] == nil {
			return nil, false
		}
		out := make(map[string]any, len(m[i]))
		for k, v := range m[i] {
			out[k] = v
		}
		return out, true
	}
	v, ok := m[i][key]
	return v, ok
}

// Set implements undo.Doc: an error for a value a map cannot hold.
func (m *metadataMaps) Set(tokens []string, v any) (bool, error) {
	i, key, whole := m.at(tokens)
	if !whole {
		s, ok := v.(string)
		if !ok {
			return false, errNotMetadataValue
		}
		if m[i] == nil {
			return false, nil // no parent: undo.Apply makes it again (one rule)
		}
		m[i][key] = s
		return true, nil
	}
	in, ok := v.(map[string]any)
	if !ok {
		return false, errNotMetadataValue
	}
	out := make(map[string]string, len(in))
	for k, e := range in {
		s, ok := e.(string)
		if !ok {
			return false, errNotMetadataValue
		}
		out[k] = s
	}
	m[i] = out
	return true, nil
}

// Remove implements undo.Doc.
func (m *metadataMaps) Remove(tokens []string) bool {
	i, key, whole := m.at(tokens)
	if whole {
		had := m[i] != nil
		m[i] = nil
		return had
	}
	_, had := m[i][key]
	delete(m[i], key)
	return had
}

// IsArrayIndex implements undo.Doc: the maps hold no arrays.
func (m *metadataMaps) IsArrayIndex([]string) bool { return false }

// errNotMetadataValue: an undo value that labels or annotations cannot hold.
var errNotMetadataValue = errors.New("not a label or annotation value")
