package engine

// The intake: the one reader of a request's bytes (package jsonscan). It builds a record of each
// object once — its checks (InputError), its top-level members and its metadata facts — and
// every later stage (the plan, the paths, undo's asks, the loop detector, lists) reads the
// record, never the bytes again (the typed decode aside).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
)

// record is what intake read of one object's JSON, raw. An own record is the request's object
// as checkInput checked it, from that one scan. A derived record (a view, a restored object, a
// List's item) is read on demand, without the checks, and notes repeated members instead.
type record struct {
	raw []byte
	own bool
	// members are an own record's top-level members; apiVersion, kind and metadata their
	// values (nil: absent).
	members                    []jsonscan.Member
	apiVersion, kind, metadata []byte
	facts                      metaFacts
	factsRead                  bool // facts were read (an own record's: by the check)
	index                      *jsonscan.Index
	valid                      bool // raw was found valid JSON (checkJSON)
}

// metaFacts are the members of metadata the paths read, as JSON literals (nil: absent).
type metaFacts struct {
	// object says raw is a JSON object; repeats that apiVersion, kind, metadata or metadata's
	// namespace, labels or annotations occur twice (the label/annotation path cannot say which
	// counts: the typed decode decides).
	object, repeats                                         bool
	name, generateName, uid, namespace, labels, annotations []byte
}

// recordOf returns the record of raw: the call's own when raw is its object, else a derived one.
func (r *call) recordOf(raw []byte) *record {
	if own := r.rec; own != nil && len(raw) > 0 && len(own.raw) == len(raw) && &own.raw[0] == &raw[0] {
		return own
	}
	return &record{raw: raw}
}

// meta returns metadata's value and whether raw has it (the last one, as a decode reads it).
// topLevel returns the request's top-level members as its intake read them, nil where rec is
// not the request's own record (answer.Splice then scans them).
func (rec *record) topLevel() []jsonscan.Member {
	if rec == nil || !rec.own {
		return nil
	}
	return rec.members
}

func (rec *record) meta() ([]byte, bool) {
	if rec.own {
		return rec.metadata, rec.metadata != nil
	}
	m, _, ok := jsonscan.Find(rec.raw, "metadata")
	return m.Value, ok
}

// indexed returns the index of raw, made on first use (an own record's from its members).
func (rec *record) indexed() *jsonscan.Index {
	if rec.index == nil {
		if rec.own {
			rec.index = jsonscan.NewIndexOf(rec.raw, rec.members)
		} else {
			rec.index = jsonscan.NewIndex(rec.raw)
		}
	}
	return rec.index
}

// mayCarryUndo reports whether raw may carry an undo.Annotation (undo.Marker in its metadata;
// in all of raw for a derived record).
func (rec *record) mayCarryUndo() bool {
	if rec.own {
		return bytes.Contains(rec.metadata, undo.Marker)
	}
	return bytes.Contains(rec.raw, undo.Marker)
}

// metaFacts returns the metadata facts, read on first use for a derived record (the last of each
// member, as a decode reads it; one the paths read twice noted in repeats).
func (rec *record) metaFacts() *metaFacts {
	if rec.factsRead {
		return &rec.facts
	}
	rec.factsRead = true
	f := &rec.facts
	var seen [6]bool // apiVersion, kind, metadata; namespace, labels, annotations
	once := func(i int, slot *[]byte, v []byte) {
		f.repeats = f.repeats || seen[i]
		seen[i], *slot = true, v
	}
	f.object = jsonscan.EachMember(rec.raw, func(key, value []byte) bool {
		switch string(jsonscan.MemberName(key)) {
		case "apiVersion":
			once(0, &rec.apiVersion, value)
		case "kind":
			once(1, &rec.kind, value)
		case "metadata":
			once(2, &rec.metadata, value)
		}
		return !f.repeats
	})
	if f.repeats || rec.metadata == nil {
		return f
	}
	jsonscan.EachMember(rec.metadata, func(key, v []byte) bool {
		switch string(jsonscan.MemberName(key)) {
		case "name":
			f.name = v
		case "generateName":
			f.generateName = v
		case "uid":
			f.uid = v
		case "namespace":
			once(3, &f.namespace, v)
		case "labels":
			once(4, &f.labels, v)
		case "annotations":
			once(5, &f.annotations, v)
		}
		return !f.repeats
	})
	return f
}

// stringOf returns the text of the JSON string literal lit; ok is false when lit is no string.
func stringOf(lit []byte) (string, bool) { return jsonscan.String(lit) }

// uidOf returns the metadata.uid of an own record as text, "" when absent or no string.
func (rec *record) uidOf() string {
	if rec == nil {
		return ""
	}
	var uid string
	_ = json.Unmarshal(rec.metaFacts().uid, &uid)
	return uid
}

// checkInput checks raw, the object of a request for (gvk, t), before any chain reads it and
// returns its own record, made in into: a *DecodeError with an *InputError for an object
// InputError describes. Nil record: a (gvk, t) without a chain (not checked), or invalid JSON
// (left to the chain's decode, which names the syntax error). A list of a hooked kind is checked
// as a list here and each item in runList (checkItem).
func (r *Registry) checkInput(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte, valid bool, into *record) (*record, error) {
	list := false
	if r.chains[Key{GVK: gvk, Type: t}] == nil {
		if r.listChain(gvk, t) == nil {
			return nil, nil
		}
		list = true
	}
	err := shapeOf(r.scheme, gvk, list).check(raw, gvk, "object", "the request is for", into)
	if err != nil && !valid && !jsonscan.Valid(raw) {
		return nil, nil // the scan's answer on invalid JSON means nothing
	}
	if err != nil {
		return nil, &failure.DecodeError{GVK: gvk, Err: err}
	}
	if into.raw == nil {
		return nil, nil
	}
	return into, nil
}

// checkJSON returns a *DecodeError of gvk naming raw's syntax error when raw is not valid JSON
// (not checked when valid says it is, nor again once it was), nil otherwise: for the paths that
// read raw as a jsondoc.Doc or a metadata parse, which split only what they read.
func (rec *record) checkJSON(gvk schema.GroupVersionKind, valid bool) error {
	if valid || rec.valid || jsonscan.Valid(rec.raw) {
		rec.valid = true
		return nil
	}
	var v any
	return &failure.DecodeError{GVK: gvk, Err: json.Unmarshal(rec.raw, &v)}
}

// check returns an *InputError when raw is an object InputError describes (nil for no JSON
// object: the decode refuses it) and makes raw's own record in found (raw nil for no object), in
// one pass. gvk is the kind raw must be; subject names raw in the message ("object", "item") and
// expected introduces gvk. First reported: a wrong top-level key, a wrong kind, then metadata's.
func (s *inputShape) check(raw []byte, gvk schema.GroupVersionKind, subject, expected string, found *record) error {
	var topErr, metaErr error
	*found = record{own: true, factsRead: true}
	top := level{fields: &s.top, fold: true}
	end := jsonscan.ScanObject(raw, func(key, rest []byte) int {
		name, err := top.add(keyName(key))
		if err != nil {
			topErr = err
			return -1
		}
		n := -1
		if string(name) == "metadata" && metaErr == nil {
			n = s.checkMetadata(rest, &found.facts, &metaErr)
		}
		if n < 0 {
			n = jsonscan.SkipValue(rest, 0)
		}
		found.members = append(found.members, jsonscan.Member{Key: string(name), Value: rest[:n]})
		switch string(name) {
		case "apiVersion":
			found.apiVersion = rest[:n]
		case "kind":
			found.kind = rest[:n]
		case "metadata":
			found.metadata = rest[:n]
		}
		return n
	})
	if topErr != nil {
		return topErr
	}
	if err := checkKind(found.apiVersion, found.kind, gvk, subject, expected); err != nil {
		return err
	}
	if metaErr != nil {
		return metaErr
	}
	if end >= 0 {
		found.raw, found.facts.object = raw, true
	}
	return nil
}

// keyName returns the text of the member key literal lit (nil when lit is no string: invalid
// JSON, whose answer checkInput drops).
func keyName(lit []byte) []byte {
	if name, plain := jsonscan.PlainText(lit); plain {
		return name
	}
	if s, ok := jsonscan.String(lit); ok {
		return []byte(s)
	}
	return nil
}

// checkMetadata checks the metadata object at the start of rest, noting its facts in f, and
// returns its length; -1 when rest is no object, or when it found a problem, which it sets in
// *errp.
func (s *inputShape) checkMetadata(rest []byte, f *metaFacts, errp *error) int {
	meta := level{where: "metadata", fields: &s.meta, fold: true}
	return jsonscan.ScanObject(rest, func(key, value []byte) int {
		name, err := meta.add(keyName(key))
		if err != nil {
			*errp = err
			return -1
		}
		n, slot := -1, (*[]byte)(nil)
		switch string(name) {
		case "labels", "annotations":
			where := "metadata.labels"
			slot = &f.labels
			if string(name) == "annotations" {
				slot, where = &f.annotations, "metadata.annotations"
			}
			if s.maps {
				if n = checkMapKeys(where, value, errp); n < 0 && *errp != nil {
					return n
				}
			}
		case "name":
			slot = &f.name
		case "generateName":
			slot = &f.generateName
		case "uid":
			slot = &f.uid
		case "namespace":
			slot = &f.namespace
		}
		if n < 0 {
			n = jsonscan.SkipValue(value, 0)
		}
		if slot != nil {
			*slot = value[:n]
		}
		return n
	})
}

// checkMapKeys checks that no key of the map at the start of rest (labels or annotations,
// named where) repeats, and returns the map's length; -1 when rest is no object, or when a key
// repeats, which it sets in *errp.
func checkMapKeys(where string, rest []byte, errp *error) int {
	keys := level{where: where}
	return jsonscan.ScanObject(rest, func(key, value []byte) int {
		if _, err := keys.add(keyName(key)); err != nil {
			*errp = err
			return -1
		}
		return jsonscan.SkipValue(value, 0)
	})
}

// decodeStringMap decodes the JSON value into a map[string]string exactly as encoding/json's
// Unmarshal does (null: a nil map; a null member: ""; a repeated key: its last value, and dups
// set, as when encoding/json decoded it: a value that is no plain string, or refused).
func decodeStringMap(value []byte) (m map[string]string, dups bool, err error) {
	if string(value) == "null" {
		return nil, false, nil
	}
	// One member per ':' outside strings; values that hold colons (a JSON blob in an
	// annotation) would make the guess too big, hence the cap.
	m = make(map[string]string, min(bytes.Count(value, []byte{':'}), 64))
	plain := true
	isObject := jsonscan.EachMember(value, func(keyLit, valueLit []byte) bool {
		key, ok := jsonscan.String(keyLit)
		v := ""
		if ok && string(valueLit) != "null" {
			v, ok = jsonscan.String(valueLit)
		}
		if !ok {
			plain = false
			return false
		}
		if _, seen := m[key]; seen {
			dups = true
		}
		m[key] = v
		return true
	})
	if !isObject || !plain {
		var into map[string]string
		err := json.Unmarshal(value, &into)
		return into, true, err // the answer encodes the map whole
	}
	return m, dups, nil
}

func jsonString(s string) json.RawMessage {
	return jsonscan.AppendString(make([]byte, 0, len(s)+2), s)
}

// listItems returns the items of the list raw, without copying them (validated unless valid
// says so); as in a decode, the last "items" counts, and null or none is an empty list.
func listItems(raw []byte, valid bool) ([][]byte, error) {
	if !valid && !jsonscan.Valid(raw) {
		var v any
		return nil, kjson.UnmarshalCaseSensitivePreserveInts(raw, &v) // names the syntax error
	}
	items, _, isObject := jsonscan.Find(raw, "items")
	if !isObject && !jsonscan.EachMember(raw, func(_, _ []byte) bool { return false }) {
		return nil, errors.New("list is not a JSON object")
	}
	if items.Value == nil || string(items.Value) == "null" {
		return nil, nil
	}
	els, ok := jsonscan.Elements(items.Value)
	if !ok {
		return nil, errors.New("items is not a JSON array")
	}
	return els, nil
}

// itemID is what runList reads of an item before running its chain.
type itemID struct {
	APIVersion, Kind, Name, Namespace string
}

// itemIdentity reads apiVersion, kind, metadata.name and metadata.namespace of item (valid
// JSON) as a decode would, and checks that item is a JSON object of kind want or has neither.
func itemIdentity(item []byte, want schema.GroupVersionKind) (itemID, error) {
	var id itemID
	top, ok := jsonscan.Members(item)
	if !ok {
		return id, errors.New("item is not a JSON object")
	}
	var metadata []byte
	for _, m := range top {
		if m.Key == "metadata" {
			metadata = m.Value
		}
	}
	if err := decodeStrings(top, "", map[string]*string{"apiVersion": &id.APIVersion, "kind": &id.Kind}); err != nil {
		return id, err
	}
	if meta, ok := jsonscan.Members(metadata); ok {
		if err := decodeStrings(meta, "metadata.", map[string]*string{"name": &id.Name, "namespace": &id.Namespace}); err != nil {
			return id, err
		}
	} else if metadata != nil && string(metadata) != "null" {
		return id, errors.New("metadata is not a JSON object")
	}
	if id.APIVersion == "" && id.Kind == "" {
		return id, nil
	}
	if apiVersion, kind := want.ToAPIVersionAndKind(); id.APIVersion != apiVersion || id.Kind != kind {
		return id, fmt.Errorf("item is apiVersion %q kind %q, want %q %q", id.APIVersion, id.Kind, apiVersion, kind)
	}
	return id, nil
}

// decodeStrings decodes the members named in fields, each a JSON string or null (the empty
// string), into their targets; a repeated key counts with its last value. Errors name the key
// after prefix.
func decodeStrings(ms []jsonscan.Member, prefix string, fields map[string]*string) error {
	for _, m := range ms {
		dst, ok := fields[m.Key]
		switch {
		case !ok:
		case string(m.Value) == "null":
			*dst = ""
		default:
			v, ok := jsonscan.String(m.Value)
			if !ok {
				return fmt.Errorf("%s%s is %s, want a string", prefix, m.Key, m.Value)
			}
			*dst = v
		}
	}
	return nil
}
