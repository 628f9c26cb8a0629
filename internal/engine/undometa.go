package engine

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
)

// undoOnMetadata reports whether the undo read of c with plan p can take the label/annotation
// fast path: every entry addresses labels or annotations (a key, or the whole map), the read
// chain's own hooks (if any) are MetadataHooks and, for a clear-text undo that must verify,
// so is every write chain that records its undo.
func (r *Registry) undoOnMetadata(c *chain, p undoPlan) bool {
	if len(c.hooks) > 0 && !c.metadataOnly() || len(p.carry) > 0 {
		return false
	}
	for _, s := range p.steps {
		if s.entry.Op != "" || len(s.tokens) < 2 || len(s.tokens) > 3 || s.tokens[0] != "metadata" || mapIndex(s.tokens[1]) < 0 {
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

// undoMetadata is undoView, its verification (p.verify) and the answer for an undo that undoOnMetadata
// admits, on the labels and annotations alone: no decode of the object, no JSON Patch apply.
// dropped says why the undo was dropped ("" when it was applied). It returns
// errNotMetadataPath for a request the fast path does not handle exactly (a repeated key, a
// null map): the caller takes the general path.
func (rn *call) undoMetadata(ctx context.Context, c *chain, raw []byte, p undoPlan) (o outcome, dropped string, err error) {
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
	view, dropped := undoMaps(stored, p.steps)
	if dropped != "" {
		view = stored
	}
	after := view
	if len(c.hooks) > 0 {
		m, err := c.metadataHooked(ctx, rn, doc.namespace, view)
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

// undoMaps applies steps (all on labels or annotations) to copies of the stored maps with the
// semantics of applyUndoSteps: the undo annotation goes first, then the entries in reverse
// order, each only where the map still holds what the hooks wrote. A nil map is absent.
func undoMaps(stored [2]map[string]string, steps []undoStep) ([2]map[string]string, string) {
	view := [2]map[string]string{maps.Clone(stored[0]), maps.Clone(stored[1])}
	delete(view[1], UndoAnnotation)
	for _, s := range slices.Backward(steps) {
		i := mapIndex(s.tokens[1])
		e := s.entry
		if len(s.tokens) == 3 {
			key := s.tokens[2]
			cur, has := view[i][key]
			var hooked string
			if e.Hooked != nil && json.Unmarshal(e.Hooked, &hooked) != nil {
				continue // not a string: no map value equals it
			}
			if has != (e.Hooked != nil) || has && cur != hooked {
				continue
			}
			switch {
			case e.Original == nil:
				delete(view[i], key)
			case view[i] == nil:
				// the map is gone: nothing to restore into
			default:
				var original string
				if json.Unmarshal(e.Original, &original) != nil {
					return view, UndoMalformed // a value no write chain could have recorded
				}
				view[i][key] = original
			}
			continue
		}
		has := view[i] != nil
		if has && e.Hooked == nil && i == 1 && len(view[i]) == 0 {
			has = false // only the undo annotation was there: the hooks had removed the map
		}
		var hooked map[string]string
		if e.Hooked != nil && json.Unmarshal(e.Hooked, &hooked) != nil {
			continue
		}
		if has != (e.Hooked != nil) || has && !maps.Equal(view[i], hooked) {
			continue
		}
		view[i] = nil
		if e.Original != nil {
			var original map[string]string
			if json.Unmarshal(e.Original, &original) != nil || original == nil {
				return view, UndoMalformed
			}
			view[i] = original
		}
	}
	return view, ""
}
