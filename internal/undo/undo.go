package undo

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Annotation is the annotation in which a write chain records its undo.
const Annotation = "synchook.io/undo"

// DefaultMaxBytes bounds the annotation's value as stored (sealed and encoded): 16 KiB, well
// within the 256 KiB Kubernetes allows for all annotations of an object.
const DefaultMaxBytes = 16 << 10

// Entry is one change of a write chain and how to take it back. Its Op says which kind:
//
//	""        at Path (an RFC 6901 JSON Pointer) the hooks wrote Hooked (absent: they removed
//	          the value) where the syncer had sent Original (absent: there was no value);
//	          undone by putting Original back where Path still holds Hooked
//	OpInsert  the hooks removed the array element Original at Path (its index); undone by
//	          inserting it there again
//	OpRemove  the hooks inserted the array element Hooked at Path (its index); undone by
//	          removing the element there if it is still Hooked
//
// so that an element inserted or removed anywhere in an array is one entry the size of the
// element, never the shifted rest of the array. A reader that does not know an Op refuses the
// whole record.
//
// Kept marks an entry carried over from an undo whose hooks are no longer all configured: a
// read applies it only where Restorable, and each write carries it on while the object still
// holds what the hook wrote, so that `synchook cleanup` can still list it.
type Entry struct {
	Kept     bool            `json:"k,omitempty"`
	Op       string          `json:"op,omitempty"`
	Path     string          `json:"path"`
	Hooked   json.RawMessage `json:"hooked,omitempty"`
	Original json.RawMessage `json:"original,omitempty"`
}

// Record is what one write recorded: its Entries, in the order the change made them (a reader
// applies them backwards), and Writers, a fingerprint of each hook of the write chain that
// recorded them (engine: of its name and revision), which tells a reader whether the chain
// configured now would put the change back on the next write.
type Record struct {
	Writers []string `json:"w,omitempty"`
	Entries []Entry  `json:"e"`
}

// Identity is what a sealed undo is bound to: the object it was written on.
type Identity struct {
	APIVersion, Kind, Namespace, Name string
}

// Side is the cluster an object lives in, part of what a sealed undo is bound to.
type Side string

// The two sides.
const (
	Physical Side = "physical"
	Virtual  Side = "virtual"
)

// additionalData is the AEAD's additional data for an object: its identity and side, each
// length-prefixed so that no two identities share an encoding.
func additionalData(id Identity, side Side) []byte {
	fields := [...]string{"synchook.io/undo s1", string(side), id.APIVersion, id.Kind, id.Namespace, id.Name}
	n := 0
	for _, s := range fields {
		n += len(s) + 8 // "len:" and ";"
	}
	b := make([]byte, 0, n)
	for _, s := range fields {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
		b = append(b, ';')
	}
	return b
}

// Errors of Open and ParseRing. Open's errors never include the value or the plaintext.
var (
	// ErrNotSealed: the value is not a sealed undo (no "s1." prefix): a clear-text undo or
	// something else.
	ErrNotSealed = errors.New("not a sealed undo")
	// ErrUnknownKey: the value names a key the ring does not hold.
	ErrUnknownKey = errors.New("sealed with a key this ring does not hold")
	// ErrUnauthentic: the value does not open with its key for this object (forged, copied
	// from another object, or damaged).
	ErrUnauthentic = errors.New("does not authenticate for this object")
	// ErrMalformed: the value or the record inside is not in the format of this package.
	ErrMalformed = errors.New("malformed undo")
)

// The kinds of Entry other than the value at a path (Entry.Op).
const (
	OpInsert = "insert"
	OpRemove = "remove"
)

// knownOps are the entry kinds this build applies.
var knownOps = map[string]bool{"": true, OpInsert: true, OpRemove: true}

// ParseClear parses a clear-text undo value (a JSON array of Entry) as a Record without a
// Writer. It fails with ErrMalformed, never naming the value.
func ParseClear(value string) (Record, error) {
	var entries []Entry
	if json.Unmarshal([]byte(value), &entries) != nil {
		return Record{}, fmt.Errorf("%w: not a JSON array of entries", ErrMalformed)
	}
	rec := Record{Entries: entries}
	return rec, rec.check()
}

// check refuses a record with an entry kind this build does not know.
func (r Record) check() error {
	for _, e := range r.Entries {
		if !knownOps[e.Op] {
			return fmt.Errorf("%w: entry kind %q unknown to this build", ErrMalformed, e.Op)
		}
	}
	return nil
}

// Clear returns the clear-text value of the record's entries (a JSON array of Entry), the
// format used without a key.
func (r Record) Clear() (string, error) {
	data, err := json.Marshal(r.Entries)
	if err != nil {
		return "", err
	}
	return string(data), nil
}
