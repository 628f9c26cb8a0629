// Package intake is the one reader of a request's bytes (package jsonscan). In: an object's JSON
// (the request's, an old object, a List's item) and the kind it must be. Out: its Record, built
// once — the checks (InputError, Shape.Check), the top-level members, the metadata facts — that
// every later stage of the engine (the plan, the paths, undo's asks, the loop detector, lists)
// reads instead of the bytes (the typed decode aside, package decode). It runs no hook and
// chooses no path: that is the engine's.
package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
)

// Record is what intake read of one object's JSON, Raw. An own record is the request's object
// as Shape.Check checked it, from that one scan. A derived record (Record{Raw: …}: a view, a
// restored object, a List's item) is read on demand, without the checks, and notes repeated
// members instead. APIVersion, Kind and Metadata are their members' values (nil: absent), an
// own record's from the check, a derived record's once Facts was asked.
type Record struct {
	Raw                        []byte
	APIVersion, Kind, Metadata []byte
	own                        bool
	members                    []jsonscan.Member // an own record's top-level members
	facts                      Facts
	factsRead                  bool // facts were read (an own record's: by the check)
	index                      *jsonscan.Index
	valid                      bool // Raw was found valid JSON (CheckJSON)
}

// Facts are the members of metadata the paths read, as JSON literals (nil: absent).
type Facts struct {
	// Object says Raw is a JSON object; Repeats that apiVersion, kind, metadata or metadata's
	// namespace, labels or annotations occur twice (the label/annotation path cannot say which
	// counts: the typed decode decides).
	Object, Repeats                                         bool
	Name, GenerateName, UID, Namespace, Labels, Annotations []byte
	CreationTimestamp                                       []byte
}

// Own reports whether rec is the request's own record, made by Shape.Check.
func (rec *Record) Own() bool { return rec.own }

// TopLevel returns the request's top-level members as its intake read them, nil where rec is
// not the request's own record (answer.Splice then scans them).
func (rec *Record) TopLevel() []jsonscan.Member {
	if rec == nil || !rec.own {
		return nil
	}
	return rec.members
}

// TopMember returns the value of Raw's top-level member key and whether Raw has it (the last
// one, as a decode reads it): an own record's from the members its check read.
func (rec *Record) TopMember(key string) ([]byte, bool) {
	if !rec.own {
		m, _, ok := jsonscan.Find(rec.Raw, key)
		return m.Value, ok
	}
	for i := len(rec.members) - 1; i >= 0; i-- {
		if rec.members[i].Key == key {
			return rec.members[i].Value, true
		}
	}
	return nil, false
}

// Meta returns metadata's value and whether Raw has it (the last one, as a decode reads it).
func (rec *Record) Meta() ([]byte, bool) {
	if rec.own {
		return rec.Metadata, rec.Metadata != nil
	}
	m, _, ok := jsonscan.Find(rec.Raw, "metadata")
	return m.Value, ok
}

// Indexed returns the index of Raw, made on first use (an own record's from its members).
func (rec *Record) Indexed() *jsonscan.Index {
	if rec.index == nil {
		if rec.own {
			rec.index = jsonscan.NewIndexOf(rec.Raw, rec.members)
			if a := rec.facts.Annotations; a != nil { // the check refuses a repeated key: each is there once
				rec.index.Hold("/metadata/annotations", a)
			}
		} else {
			rec.index = jsonscan.NewIndex(rec.Raw)
		}
	}
	return rec.index
}

// IndexOf returns the index of raw when rec is raw's own record (the same bytes) and a reader
// made it already (Indexed), nil otherwise: for a reader that takes what the intake and the
// stages before it read, and scans raw itself without it.
func (rec *Record) IndexOf(raw []byte) *jsonscan.Index {
	if rec == nil || !rec.own || rec.index == nil || len(raw) == 0 || len(rec.Raw) != len(raw) || &rec.Raw[0] != &raw[0] {
		return nil
	}
	return rec.index
}

// MetaMembers returns the members of metadata an undo.Identity is made of, as the check read
// them, for an own record whose metadata is present (each key there once); false otherwise
// (undo.IdentityIn reads them in Meta's value).
func (rec *Record) MetaMembers() (undo.MetaMembers, bool) {
	if !rec.own || rec.Metadata == nil {
		return undo.MetaMembers{}, false
	}
	f := &rec.facts
	return undo.MetaMembers{
		Namespace: f.Namespace, Name: f.Name, GenerateName: f.GenerateName, UID: f.UID,
		CreationTimestamp: f.CreationTimestamp, Annotations: f.Annotations,
	}, true
}

// Doc returns a jsondoc.Doc of Raw (valid JSON): an own record's with its top level split
// from the members the check read (jsondoc.NewOf), so that no reader walks it again; a derived
// record's as jsondoc.New makes it.
func (rec *Record) Doc() *jsondoc.Doc {
	return jsondoc.NewOf(rec.Raw, rec.TopLevel())
}

// Annotations returns the value of the annotations member of Meta's value (nil: none, or
// metadata is no object), the last one as jsonscan.Find reads it: an own record's from its
// check, without reading Raw again.
func (rec *Record) Annotations() []byte {
	if rec.own {
		return rec.facts.Annotations
	}
	meta, _ := rec.Meta()
	m, _, _ := jsonscan.Find(meta, "annotations")
	return m.Value
}

// MayCarryUndo reports whether Raw may carry an undo.Annotation (undo.Marker in its metadata;
// in all of Raw for a derived record).
func (rec *Record) MayCarryUndo() bool {
	if rec.own {
		return bytes.Contains(rec.Metadata, undo.Marker)
	}
	return bytes.Contains(rec.Raw, undo.Marker)
}

// Facts returns the metadata facts, read on first use for a derived record (the last of each
// member, as a decode reads it; one the paths read twice noted in Repeats).
func (rec *Record) Facts() *Facts {
	if rec.factsRead {
		return &rec.facts
	}
	rec.factsRead = true
	f := &rec.facts
	var seen [6]bool // apiVersion, kind, metadata; namespace, labels, annotations
	once := func(i int, slot *[]byte, v []byte) {
		f.Repeats = f.Repeats || seen[i]
		seen[i], *slot = true, v
	}
	f.Object = jsonscan.EachMember(rec.Raw, func(key, value []byte) bool {
		switch string(jsonscan.MemberName(key)) {
		case "apiVersion":
			once(0, &rec.APIVersion, value)
		case "kind":
			once(1, &rec.Kind, value)
		case "metadata":
			once(2, &rec.Metadata, value)
		}
		return !f.Repeats
	})
	if f.Repeats || rec.Metadata == nil {
		return f
	}
	jsonscan.EachMember(rec.Metadata, func(key, v []byte) bool {
		switch string(jsonscan.MemberName(key)) {
		case "name":
			f.Name = v
		case "generateName":
			f.GenerateName = v
		case "uid":
			f.UID = v
		case "creationTimestamp":
			f.CreationTimestamp = v
		case "namespace":
			once(3, &f.Namespace, v)
		case "labels":
			once(4, &f.Labels, v)
		case "annotations":
			once(5, &f.Annotations, v)
		}
		return !f.Repeats
	})
	return f
}

// String returns the text of the JSON string literal lit; ok is false when lit is no string.
func String(lit []byte) (string, bool) { return jsonscan.String(lit) }

// UID returns the metadata.uid of an own record as text, "" when absent or no string.
func (rec *Record) UID() string {
	if rec == nil {
		return ""
	}
	var uid string
	_ = json.Unmarshal(rec.Facts().UID, &uid)
	return uid
}

// CheckJSON returns a *failure.DecodeError of gvk naming Raw's syntax error when Raw is not valid JSON
// (not checked when valid says it is, nor again once it was), nil otherwise: for the paths that
// read raw as a jsondoc.Doc or a metadata parse, which split only what they read.
func (rec *Record) CheckJSON(gvk schema.GroupVersionKind, valid bool) error {
	if valid || rec.valid || jsonscan.Valid(rec.Raw) {
		rec.valid = true
		return nil
	}
	var v any
	return &failure.DecodeError{GVK: gvk, Err: json.Unmarshal(rec.Raw, &v)}
}

// Check returns an *InputError when raw is an object InputError describes (nil for no JSON
// object: the decode refuses it) and makes raw's own record in found (raw nil for no object), in
// one pass. gvk is the kind raw must be; subject names raw in the message ("object", "item") and
// expected introduces gvk. First reported: a wrong top-level key, a wrong kind, then metadata's.
func (s *Shape) Check(raw []byte, gvk schema.GroupVersionKind, subject, expected string, found *Record) error {
	var topErr, metaErr error
	*found = Record{own: true, factsRead: true}
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
			found.APIVersion = rest[:n]
		case "kind":
			found.Kind = rest[:n]
		case "metadata":
			found.Metadata = rest[:n]
		}
		return n
	})
	if topErr != nil {
		return topErr
	}
	if err := checkKind(found.APIVersion, found.Kind, gvk, subject, expected); err != nil {
		return err
	}
	if metaErr != nil {
		return metaErr
	}
	if end >= 0 {
		found.Raw, found.facts.Object = raw, true
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
func (s *Shape) checkMetadata(rest []byte, f *Facts, errp *error) int {
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
			slot = &f.Labels
			if string(name) == "annotations" {
				slot, where = &f.Annotations, "metadata.annotations"
			}
			if s.maps {
				if n = checkMapKeys(where, value, errp); n < 0 && *errp != nil {
					return n
				}
			}
		case "name":
			slot = &f.Name
		case "generateName":
			slot = &f.GenerateName
		case "uid":
			slot = &f.UID
		case "creationTimestamp":
			slot = &f.CreationTimestamp
		case "namespace":
			slot = &f.Namespace
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

// DecodeStringMap decodes the JSON value into a map[string]string exactly as encoding/json's
// Unmarshal does (null: a nil map; a null member: ""; a repeated key: its last value, and dups
// set, as when encoding/json decoded it: a value that is no plain string, or refused).
func DecodeStringMap(value []byte) (m map[string]string, dups bool, err error) {
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

// ListItems returns the items of the list raw, without copying them (validated unless valid
// says so); as in a decode, the last "items" counts, and null or none is an empty list.
func ListItems(raw []byte, valid bool) ([][]byte, error) {
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

// ItemID is what the engine's runList reads of an item before running its chain.
type ItemID struct {
	APIVersion, Kind, Name, Namespace string
}

// ItemIdentity reads apiVersion, kind, metadata.name and metadata.namespace of item (valid
// JSON) as a decode would, and checks that item is a JSON object of kind want or has neither.
func ItemIdentity(item []byte, want schema.GroupVersionKind) (ItemID, error) {
	var id ItemID
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

// WithTypeMeta returns item with apiVersion and kind of gvk added in front when it has
// neither, else item itself. item must be a JSON object.
func (id ItemID) WithTypeMeta(item []byte, gvk schema.GroupVersionKind) []byte {
	if id.APIVersion != "" || id.Kind != "" {
		return item
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	head := `{"apiVersion":` + string(jsonscan.AppendString(nil, apiVersion)) + `,"kind":` + string(jsonscan.AppendString(nil, kind))
	if body := bytes.TrimSpace(bytes.TrimSpace(item)[1:]); len(body) == 0 || body[0] != '}' { // after the opening brace
		return append([]byte(head+","), body...)
	}
	return []byte(head + "}")
}
