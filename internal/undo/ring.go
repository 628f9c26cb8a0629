package undo

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/lru"
)

// KeyBytes is the length of one key: 32 bytes for AES-256-GCM and 32 for the HMAC-SHA256 that
// derives the nonce.
const KeyBytes = 64

const (
	sealedPrefix = "s2."
	legacyPrefix = "s1."
	nonceBytes   = 12
)

// Key is one key of a Ring: an ID (1 to 32 characters of [a-z0-9-]) and KeyBytes of secret.
// A Key's String and Format never show the secret.
type Key struct {
	ID     string
	secret []byte
}

// String returns "undo key <ID>".
func (k Key) String() string { return "undo key " + k.ID }

// GoString is String, so that %#v does not print the secret either.
func (k Key) GoString() string { return k.String() }

// NewKey returns a Key with a random ID (8 hex digits) and a random secret.
func NewKey() (Key, error) {
	secret := make([]byte, KeyBytes)
	id := make([]byte, 4)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, fmt.Errorf("new undo key: %w", err)
	}
	if _, err := rand.Read(id); err != nil {
		return Key{}, fmt.Errorf("new undo key: %w", err)
	}
	return Key{ID: hex.EncodeToString(id), secret: secret}, nil
}

func validID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// Ring holds the undo keys, oldest first: the newest seals, every key opens. A Ring is
// immutable and safe for concurrent use; Rotate returns a new one.
type Ring struct {
	keys []keyState
	// opened remembers what Open answered for the last openedEntries (identity, side, value)
	// it opened: the syncer reads the same object several times per sync (GetPhysical before
	// each write and reconcile), each read bringing the same sealed value. A hit costs a map
	// lookup instead of base64, AES-GCM, HMAC and a JSON decode. Secrets' records (which may
	// hold a stripped value) are never kept.
	opened *lru.Cache
}

// openedEntries is the size of Ring.opened, and openedValueBytes the longest value it keeps:
// at most ~8 MiB of values (a labels undo is ~150 bytes).
const (
	openedEntries    = 4096
	openedValueBytes = 2048
)

// openedKey is what Open's answer depends on besides the ring's keys.
type openedKey struct {
	id    Identity
	side  Side
	value string
}

// openedRecord is a remembered answer of Open.
type openedRecord struct {
	rec   Record
	keyID string
}

type keyState struct {
	Key
	aead cipher.AEAD
	// macs keeps HMAC-SHA256 states keyed with the nonce half of the secret: a Reset state is
	// keyed already, which hmac.New computes again (two SHA-256 blocks) on every call.
	macs *sync.Pool
}

// nonceOf returns the synthetic nonce of plain under ad: the first nonceBytes of
// HMAC-SHA256(secret[32:], ad || plain), in a new slice with room for the ciphertext after it
// (extra bytes).
func (k *keyState) nonceOf(ad, plain []byte, extra int) []byte {
	mac := k.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(ad)
	mac.Write(plain)
	var sum [sha256.Size]byte
	mac.Sum(sum[:0])
	k.macs.Put(mac)
	return append(make([]byte, 0, nonceBytes+extra), sum[:nonceBytes]...)
}

// String returns "undo key ring [<IDs>]"; no secret.
func (r *Ring) String() string { return fmt.Sprintf("undo key ring %v", r.IDs()) }

// GoString is String.
func (r *Ring) GoString() string { return r.String() }

// NewRing returns a Ring of keys (oldest first). It fails on no keys, an invalid or repeated
// ID, or a secret that is not KeyBytes long.
func NewRing(keys ...Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("undo key ring: no keys")
	}
	r := &Ring{opened: lru.New(openedEntries)}
	seen := map[string]bool{}
	for _, k := range keys {
		if !validID(k.ID) {
			return nil, fmt.Errorf("undo key ring: key ID %q: want 1 to 32 characters of a-z, 0-9 and -", k.ID)
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("undo key ring: key ID %q appears twice", k.ID)
		}
		seen[k.ID] = true
		if len(k.secret) != KeyBytes {
			return nil, fmt.Errorf("undo key ring: key %q: %d bytes, want %d", k.ID, len(k.secret), KeyBytes)
		}
		block, err := aes.NewCipher(k.secret[:32])
		if err != nil {
			return nil, fmt.Errorf("undo key ring: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("undo key ring: key %q: %w", k.ID, err)
		}
		secret := k.secret[32:]
		macs := &sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}
		r.keys = append(r.keys, keyState{Key: k, aead: aead, macs: macs})
	}
	return r, nil
}

// GenerateRing returns a Ring of one new key.
func GenerateRing() (*Ring, error) {
	k, err := NewKey()
	if err != nil {
		return nil, err
	}
	return NewRing(k)
}

// Rotate returns a Ring with the keys of r followed by a new key, which seals from then on.
func (r *Ring) Rotate() (*Ring, error) {
	k, err := NewKey()
	if err != nil {
		return nil, err
	}
	keys := make([]Key, 0, len(r.keys)+1)
	for _, ks := range r.keys {
		keys = append(keys, ks.Key)
	}
	return NewRing(append(keys, k)...)
}

// IDs returns the key IDs, oldest first.
func (r *Ring) IDs() []string {
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.ID
	}
	return ids
}

// Contains reports whether every key of other is in r with the same secret.
func (r *Ring) Contains(other *Ring) bool {
	for _, o := range other.keys {
		k := r.key(o.ID)
		if k == nil || !hmac.Equal(k.secret, o.secret) {
			return false
		}
	}
	return true
}

func (r *Ring) key(id string) *keyState {
	for i := range r.keys {
		if r.keys[i].ID == id {
			return &r.keys[i]
		}
	}
	return nil
}

// MarshalText returns the ring in the key ring text format (see the package doc).
func (r *Ring) MarshalText() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# synchook undo keys, oldest first; the last one seals\n")
	for _, k := range r.keys {
		fmt.Fprintf(&b, "%s %s\n", k.ID, base64.StdEncoding.EncodeToString(k.secret))
	}
	return b.Bytes(), nil
}

// ParseRing reads a ring from the key ring text format. Errors name the line, never a secret.
func ParseRing(data []byte) (*Ring, error) {
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("undo key ring line %d: want \"<key ID> <base64 of %d bytes>\"", n, KeyBytes)
		}
		secret, err := base64.StdEncoding.DecodeString(fields[1])
		if err != nil {
			return nil, fmt.Errorf("undo key ring line %d (key %q): the secret is not standard base64", n, fields[0])
		}
		keys = append(keys, Key{ID: fields[0], secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("undo key ring: %w", err)
	}
	return NewRing(keys...)
}

// IsSealed reports whether value is in a sealed format ("s2." or "s1."; it may still not open).
func IsSealed(value string) bool {
	return strings.HasPrefix(value, sealedPrefix) || strings.HasPrefix(value, legacyPrefix)
}

// Seal returns the sealed annotation value of rec for the object id on side, with the newest
// key, bound as bindingOf(id) says: "s2.<binding>.<key ID>.<base64url>". The same arguments
// always give the same value, except that a name- or generateName-bound record (a Create's)
// takes the time of sealing in seconds (Record.Sealed, set here).
func (r *Ring) Seal(id Identity, side Side, rec Record) (string, error) {
	b := bindingOf(id)
	rec.Sealed = 0
	if b == BindName || b == BindGenerateName {
		rec.Sealed = now().Unix()
	}
	return r.seal(id, side, rec, b, b)
}

// seal is Seal with the binding b the value names and the one its additional data is made
// for (adAs: b, except in tests that make an earlier build's values).
func (r *Ring) seal(id Identity, side Side, rec Record, b, adAs Binding) (string, error) {
	if err := rec.check(); err != nil {
		return "", err
	}
	plain, err := json.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("seal undo: %w", err)
	}
	k := &r.keys[len(r.keys)-1]
	ad, ok := additionalData(id, side, adAs)
	if !ok {
		return "", fmt.Errorf("seal undo: the identity cannot hold binding %q", b)
	}
	nonce := k.nonceOf(ad, plain, len(plain)+k.aead.Overhead())
	out := k.aead.Seal(nonce, nonce, plain, ad) // nonce || ciphertext || tag
	value := make([]byte, 0, len(sealedPrefix)+2+len(k.ID)+1+base64.RawURLEncoding.EncodedLen(len(out)))
	value = append(append(value, sealedPrefix...), byte(b), '.')
	value = append(append(value, k.ID...), '.')
	value = base64.RawURLEncoding.AppendEncode(value, out)
	return unsafe.String(unsafe.SliceData(value), len(value)), nil // value is not written again
}

// Open returns the record sealed in value for the object id on side. A value opens only under
// the binding it was sealed with, and only where id fits that binding: BindUID on the object
// of that uid, BindGenerateName on an object whose name has the prefix, BindLegacy ("s1.") on
// the physical side only. Errors: ErrNotSealed (a clear-text value), ErrUnknownKey,
// ErrUnauthentic (forged, copied from another object, bound otherwise, or damaged; also a
// nonce that is not the synthetic IV of its plaintext), ErrMalformed. It returns the ID of the
// key that opened it. Binding tells how an opened value is bound.
//
// Answers are remembered per (id, side, value) up to openedValueBytes, except for Secrets; the Record returned is the
// caller's own (its Entries slice a copy; the values inside it must not be changed).
func (r *Ring) Open(id Identity, side Side, value string) (Record, string, error) {
	remember := r.opened != nil && len(value) <= openedValueBytes && id.Kind != "Secret"
	if !remember {
		return r.open(id, side, value)
	}
	key := openedKey{id, side, value}
	if v, ok := r.opened.Get(key); ok {
		o := v.(openedRecord)
		rec := o.rec
		rec.Entries = slices.Clone(rec.Entries)
		return rec, o.keyID, nil
	}
	rec, keyID, err := r.open(id, side, value)
	if err == nil {
		kept := rec
		kept.Entries = slices.Clone(rec.Entries)
		r.opened.Add(key, openedRecord{kept, keyID})
	}
	return rec, keyID, err
}

// open is Open without the remembered answers.
func (r *Ring) open(id Identity, side Side, value string) (Record, string, error) {
	b, rest, err := splitBinding(value)
	if err != nil {
		return Record{}, "", err
	}
	ad, fits := additionalData(id, side, b)
	if !fits {
		return Record{}, "", ErrUnauthentic
	}
	keyID, body, ok := strings.Cut(rest, ".")
	if !ok {
		return Record{}, "", fmt.Errorf("%w: no key ID", ErrMalformed)
	}
	k := r.key(keyID)
	if k == nil {
		return Record{}, "", fmt.Errorf("%w (%q)", ErrUnknownKey, keyID)
	}
	sealed, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(sealed) < nonceBytes+k.aead.Overhead() {
		return Record{}, "", fmt.Errorf("%w: not base64url of a nonce and a ciphertext", ErrMalformed)
	}
	nonce := sealed[:nonceBytes]
	plain, err := k.aead.Open(nil, nonce, sealed[nonceBytes:], ad)
	if err != nil && b == BindUID {
		// a seal of a build before the uid's source was bound
		ad, _ = additionalData(id, side, bindUIDUnsourced)
		plain, err = k.aead.Open(nil, nonce, sealed[nonceBytes:], ad)
	}
	if err != nil {
		return Record{}, "", ErrUnauthentic
	}
	if !hmac.Equal(k.nonceOf(ad, plain, 0), nonce) {
		return Record{}, "", ErrUnauthentic
	}
	var rec Record
	if err := json.Unmarshal(plain, &rec); err != nil {
		return Record{}, "", fmt.Errorf("%w: the sealed record is not JSON", ErrMalformed)
	}
	if !createdInWindow(b, id, rec) {
		return Record{}, "", ErrUnauthentic
	}
	return rec, keyID, rec.check()
}

// createdInWindow reports whether a record of binding b may open on id by its time: a name- or
// generateName-bound record only on an object created within NameBindWindow of its sealing
// (one without a time, of an earlier build, not on any created object). An object without a
// creationTimestamp (id.Created 0: not one an apiserver stored, which always sets it) is not
// checked.
func createdInWindow(b Binding, id Identity, rec Record) bool {
	if b != BindName && b != BindGenerateName || id.Created == 0 {
		return true
	}
	if rec.Sealed == 0 {
		return false
	}
	d := time.Duration(id.Created-rec.Sealed) * time.Second
	return d <= NameBindWindow && d >= -NameBindWindow
}

// splitBinding returns the binding of a sealed value and the rest after it ("<key ID>.<body>").
func splitBinding(value string) (Binding, string, error) {
	if rest, ok := strings.CutPrefix(value, legacyPrefix); ok {
		return BindLegacy, rest, nil
	}
	rest, ok := strings.CutPrefix(value, sealedPrefix)
	if !ok {
		return 0, "", ErrNotSealed
	}
	if len(rest) < 2 || rest[1] != '.' {
		return 0, "", fmt.Errorf("%w: no binding", ErrMalformed)
	}
	switch b := Binding(rest[0]); b {
	case BindUID, BindName, BindGenerateName:
		return b, rest[2:], nil
	}
	return 0, "", fmt.Errorf("%w: binding %q unknown to this build", ErrMalformed, rest[0])
}

// BindingOf returns how the sealed value is bound (it may still not open); ok is false for a
// value that is not sealed or names no binding this build knows.
func BindingOf(value string) (b Binding, ok bool) {
	b, _, err := splitBinding(value)
	return b, err == nil
}

// Keeper holds the Ring in use, which can change while synchook runs (a key Secret read after
// start, a rotation), and the kinds an undo was sealed on (SealedKinds). The zero Keeper holds
// none. It is safe for concurrent use.
type Keeper struct {
	ring    atomic.Pointer[Ring]
	kinds   sync.Map // Kind → struct{}
	changed chan struct{}
	once    sync.Once
}

// Kind is a kind and side an undo was sealed on: a read of it must stay announced to the
// syncer until no object of it carries an undo ("v1/Pod physical", "apps/v1/Deployment virtual").
type Kind struct {
	GVK  schema.GroupVersionKind
	Side Side
}

// String returns "<group/version>/<Kind> <side>" ("v1/Pod physical").
func (k Kind) String() string {
	return k.GVK.GroupVersion().String() + "/" + k.GVK.Kind + " " + string(k.Side)
}

// ParseKind parses Kind.String's format.
func ParseKind(s string) (Kind, error) {
	gvkText, side, ok := strings.Cut(s, " ")
	i := strings.LastIndexByte(gvkText, '/')
	if !ok || i <= 0 || (side != string(Physical) && side != string(Virtual)) {
		return Kind{}, fmt.Errorf("undo kind %q: want \"<group/version>/<Kind> physical|virtual\"", s)
	}
	gv, err := schema.ParseGroupVersion(gvkText[:i])
	if err != nil || gvkText[i+1:] == "" {
		return Kind{}, fmt.Errorf("undo kind %q: want \"<group/version>/<Kind> physical|virtual\"", s)
	}
	return Kind{GVK: gv.WithKind(gvkText[i+1:]), Side: Side(side)}, nil
}

// NoteSealed records that an undo was sealed on an object of gvk on side. k may be nil.
func (k *Keeper) NoteSealed(gvk schema.GroupVersionKind, side Side) {
	if k == nil {
		return
	}
	if _, loaded := k.kinds.LoadOrStore(Kind{GVK: gvk, Side: side}, struct{}{}); !loaded {
		select {
		case k.changedCh() <- struct{}{}:
		default:
		}
	}
}

// Remember adds kinds (read from where an earlier process kept them) to SealedKinds without
// signalling Changed.
func (k *Keeper) Remember(kinds ...Kind) {
	for _, kind := range kinds {
		k.kinds.Store(kind, struct{}{})
	}
}

// SealedKinds returns the kinds noted or remembered so far, sorted by String.
func (k *Keeper) SealedKinds() []Kind {
	var out []Kind
	k.kinds.Range(func(key, _ any) bool {
		out = append(out, key.(Kind))
		return true
	})
	slices.SortFunc(out, func(a, b Kind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Changed returns a channel that receives when NoteSealed learns a new kind.
func (k *Keeper) Changed() <-chan struct{} { return k.changedCh() }

func (k *Keeper) changedCh() chan struct{} {
	k.once.Do(func() { k.changed = make(chan struct{}, 1) })
	return k.changed
}

// NewKeeper returns a Keeper holding r (nil: none yet).
func NewKeeper(r *Ring) *Keeper {
	k := &Keeper{}
	k.Set(r)
	return k
}

// Ring returns the Ring in use, or nil when there is none. k may be nil.
func (k *Keeper) Ring() *Ring {
	if k == nil {
		return nil
	}
	return k.ring.Load()
}

// Set makes r the Ring in use.
func (k *Keeper) Set(r *Ring) { k.ring.Store(r) }
