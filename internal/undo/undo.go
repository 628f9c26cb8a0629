package undo

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/synchook/synchook/hooks"
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
// Len, on the first OpInsert entry of each array, is the length of that array as the hooks
// wrote it (after the whole change), so that a read can tell the elements the host added to the array since (DefaultTolerationSeconds' tolerations
// after a strip of them all) from equal elements the hooks left in place; absent in undos of
// builds before it (a read then takes every equal stored element as the host's).
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
	Len      *int            `json:"n,omitempty"`
}

// Record is what one write recorded: its Entries, in the order the change made them (a reader
// applies them backwards), and Writers, a fingerprint of each hook of the write chain that
// recorded them (engine: of its name and revision), which tells a reader whether the chain
// configured now would put the change back on the next write.
//
// Sealed, on a record bound to a name or a generateName (a Create, before the object has a
// uid), is when it was sealed (Unix seconds): it opens only on an object created within
// NameBindWindow of that time (Identity.Created), so not on a deleted and re-created object
// of the same name.
type Record struct {
	Writers []string `json:"w,omitempty"`
	Entries []Entry  `json:"e"`
	Sealed  int64    `json:"t,omitempty"`
}

// NameBindWindow is how far apart a name- or generateName-bound seal's time (Record.Sealed,
// synchook's clock) and the object's metadata.creationTimestamp (the apiserver's clock, in
// whole seconds) may be for it to open: 30 s either way. The apiserver creates the object
// right after the Create chain that sealed it answered (vcluster's syncer creates it at once;
// kube-apiserver within its webhook timeout, at most 30 s); the earlier side covers the two
// clocks' skew and the timestamp's truncation. What remains: an object deleted and re-created
// with the same name within 30 s of the first creation, before the next write re-seals with
// the uid, can still open a copy of the first one's seal.
const NameBindWindow = 30 * time.Second

// now is the clock Seal reads for Record.Sealed (tests set it).
var now = time.Now

// Identity is what a sealed undo is bound to: the object it was written on. UID is the uid
// that object has for as long as it exists (on the host side vcluster's
// vcluster.loft.sh/object-uid, else metadata.uid; on the virtual side metadata.uid), "" where
// none exists yet (a Create). GenerateName is metadata.generateName, which binds a Create that
// has no Name yet.
//
// UIDSource says where UID came from (UIDFromMetadata or UIDFromObjectUID): a seal opens only
// where the uid comes from the same place, so that a tenant who can set one cannot pose as
// the other. Created is metadata.creationTimestamp in Unix seconds (0: the object has none,
// as before it is created): it bounds where a name-bound seal opens (NameBindWindow).
type Identity struct {
	APIVersion, Kind, Namespace, Name string
	UID, GenerateName                 string
	UIDSource                         UIDSource
	Created                           int64
}

// UIDSource is where an Identity's UID comes from.
type UIDSource string

// The sources of a uid: the object's own metadata.uid, or on the host side vcluster's
// vcluster.loft.sh/object-uid annotation (the virtual object's uid).
const (
	UIDFromMetadata  UIDSource = "metadata.uid"
	UIDFromObjectUID UIDSource = "vcluster.loft.sh/object-uid"
)

// Side is the cluster an object lives in, part of what a sealed undo is bound to: the hook
// types' table's (hooks.HookType.Side), its strings in the additional data.
type Side = hooks.Side

// The two sides.
const (
	Physical = hooks.Physical
	Virtual  = hooks.Virtual
)

// Binding is what of an Identity a sealed value is bound to besides its apiVersion, kind,
// namespace and side (the letter after "s2." in the value).
type Binding byte

// The bindings. Seal picks the strongest the Identity allows: BindUID where a uid exists,
// BindGenerateName for a Create that has a generateName and no name yet, else BindName.
const (
	// BindUID: name, uid and where the uid came from (Identity.UIDSource). Opens only on the
	// object of that uid, taken from the same source. Seals of builds before the source was
	// bound (the same letter, no source) open where the uid matches from the source the
	// object has (vcluster's object-uid on the host side where set, else metadata.uid), until
	// the object's next write re-seals them.
	BindUID Binding = 'u'
	// BindName: name only (a Create of a named object, before the apiserver gives it a uid)
	// and the time of sealing (Record.Sealed). Opens only on an object of that name created
	// within NameBindWindow of that time; the next write seals it again with the uid.
	BindName Binding = 'n'
	// BindGenerateName: generateName only (a Create with metadata.generateName and no name)
	// and the time of sealing. Opens only on an object whose name starts with that
	// generateName, created within NameBindWindow of that time; objects created with the
	// same generateName in one namespace within that window can open each other's such seals.
	BindGenerateName Binding = 'g'
	// BindLegacy: an "s1." value of builds before uids were bound (name only). Opens on the
	// physical side only, never on the virtual side.
	BindLegacy Binding = '1'
)

// bindUIDUnsourced is how builds before Identity.UIDSource bound a uid: the additional data
// without the source. Open tries it for a BindUID value that does not open with the source.
const bindUIDUnsourced Binding = 0

// bindingOf returns the Binding Seal uses for id.
func bindingOf(id Identity) Binding {
	switch {
	case id.UID != "":
		return BindUID
	case id.Name == "" && id.GenerateName != "":
		return BindGenerateName
	}
	return BindName
}

// additionalData is the AEAD's additional data for an object bound by b: its identity and
// side, each length-prefixed so that no two identities share an encoding. ok is false when id
// cannot hold a value of binding b (no uid for BindUID, a name without the generateName
// prefix for BindGenerateName, the virtual side for BindLegacy). The nameless Create that
// seals BindGenerateName fits it too; a write never opens its own object's seal on a Create.
func additionalData(id Identity, side Side, b Binding) (ad []byte, ok bool) {
	var fields []string
	switch b {
	case BindLegacy:
		if side != Physical {
			return nil, false
		}
		fields = []string{"synchook.io/undo s1", string(side), id.APIVersion, id.Kind, id.Namespace, id.Name}
	case BindName:
		fields = []string{"synchook.io/undo s2 n", string(side), id.APIVersion, id.Kind, id.Namespace, id.Name}
	case BindUID:
		if id.UID == "" {
			return nil, false
		}
		source := id.UIDSource
		if source == "" {
			source = UIDFromMetadata
		}
		fields = []string{"synchook.io/undo s2 u", string(side), id.APIVersion, id.Kind, id.Namespace, id.Name, id.UID, string(source)}
	case bindUIDUnsourced:
		if id.UID == "" {
			return nil, false
		}
		fields = []string{"synchook.io/undo s2 u", string(side), id.APIVersion, id.Kind, id.Namespace, id.Name, id.UID}
	case BindGenerateName:
		if id.GenerateName == "" || id.Name != "" && !strings.HasPrefix(id.Name, id.GenerateName) {
			return nil, false
		}
		fields = []string{"synchook.io/undo s2 g", string(side), id.APIVersion, id.Kind, id.Namespace, id.GenerateName}
	default:
		return nil, false
	}
	n := 0
	for _, s := range fields {
		n += len(s) + 8 // "len:" and ";"
	}
	out := make([]byte, 0, n)
	for _, s := range fields {
		out = strconv.AppendInt(out, int64(len(s)), 10)
		out = append(out, ':')
		out = append(out, s...)
		out = append(out, ';')
	}
	return out, true
}

// Errors of Open and ParseRing. Open's errors never include the value or the plaintext.
var (
	// ErrNotSealed: the value is not a sealed undo (no "s2." or "s1." prefix): a clear-text
	// undo or something else. Never applied.
	ErrNotSealed = errors.New("not a sealed undo")
	// ErrUnknownKey: the value names a key the ring does not hold.
	ErrUnknownKey = errors.New("sealed with a key this ring does not hold")
	// ErrUnauthentic: the value does not open with its key for this object (forged, copied
	// from another object, or damaged), or its binding does not fit the object (Binding).
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

// check refuses a record with an entry kind this build does not know.
func (r Record) check() error {
	for _, e := range r.Entries {
		if !knownOps[e.Op] {
			return fmt.Errorf("%w: entry kind %q unknown to this build", ErrMalformed, e.Op)
		}
	}
	return nil
}
