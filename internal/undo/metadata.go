package undo

import (
	"errors"
	"slices"

	"github.com/synchook/synchook/internal/jsonscan"
)

// OnMetadataMaps reports whether every step of p addresses labels or annotations (a key of
// either, or the whole map) and nothing is carried: ViewMaps can then work on the two maps
// alone, without the object.
func (p Plan) OnMetadataMaps() bool {
	if len(p.Carry) > 0 {
		return false
	}
	for _, s := range p.Steps {
		if s.Op != "" || len(s.Tokens) < 2 || len(s.Tokens) > 3 || s.Tokens[0] != "metadata" || metadataMapIndex(s.Tokens[1]) < 0 {
			return false
		}
	}
	return true
}

// metadataMapIndex is 0 for "labels", 1 for "annotations", else -1: the index in metadataMaps.
func metadataMapIndex(name string) int {
	switch name {
	case "labels":
		return 0
	case "annotations":
		return 1
	}
	return -1
}

// mapEntries returns the entries that take back the change of the metadata map at path
// ("/metadata/labels" or "/metadata/annotations") from before to after (nil: absent): a
// removed or changed key gets its value back, an added key goes again (the Annotation itself
// excepted: it is the undo). Removed and changed keys first, then added ones, each in key
// order.
func mapEntries(path string, before, after map[string]string) []Entry {
	var back, added []string
	for k, v := range before {
		if a, ok := after[k]; !ok || a != v {
			back = append(back, k)
		}
	}
	for k := range after {
		if _, had := before[k]; !had && (path != "/metadata/annotations" || k != Annotation) {
			added = append(added, k)
		}
	}
	slices.Sort(back)
	slices.Sort(added)
	entries := make([]Entry, 0, len(back)+len(added))
	for _, k := range back {
		e := Entry{Path: jsonscan.Join(path, k), Original: jsonscan.AppendString(nil, before[k])}
		if v, ok := after[k]; ok {
			e.Hooked = jsonscan.AppendString(nil, v)
		}
		entries = append(entries, e)
	}
	for _, k := range added {
		entries = append(entries, Entry{Path: jsonscan.Join(path, k), Hooked: jsonscan.AppendString(nil, after[k])})
	}
	return entries
}

// RecordMaps is RecordOps for a change of labels and annotations alone, from stored to
// hooked ([0] labels, [1] annotations; nil: absent): the entries (mapEntries), after the
// empty-map entry of each map the change creates (created: the annotations map whenever
// stored has none, for the undo itself), sealed by seal. "" when the maps are equal.
func RecordMaps(stored, hooked [2]map[string]string, seal func([]Entry) (string, error)) (string, error) {
	entries := append(mapEntries("/metadata/labels", stored[0], hooked[0]), mapEntries("/metadata/annotations", stored[1], hooked[1])...)
	if len(entries) == 0 {
		return "", nil
	}
	var made []string // the maps the change makes
	if stored[0] == nil && len(hooked[0]) > 0 {
		made = append(made, "/metadata/labels")
	}
	if stored[1] == nil {
		made = append(made, "/metadata/annotations")
	}
	return seal(created(entries, made...))
}

// metadataMaps is a Doc of an object's labels and annotations alone ([0] labels,
// [1] annotations; nil: absent), for Apply of a plan whose steps address nothing else
// (Plan.OnMetadataMaps): a key of either map or a whole map. Values are strings; a whole map
// is a map[string]any of strings, as Doc values are.
type metadataMaps [2]map[string]string

// at returns the map index and key (or "" for the whole map) that tokens address.
func (m *metadataMaps) at(tokens []string) (i int, key string, whole bool) {
	i = metadataMapIndex(tokens[1])
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
			return false, nil // no parent: Apply makes it again (one rule)
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
