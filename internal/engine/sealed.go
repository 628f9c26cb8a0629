package engine

// Sealed undo: how the engine uses package undo.
//
// With a key (RegistryOptions.Keys holds a Ring), a write chain seals its undo for the object's
// identity and side, and a read applies an undo that opens — whatever hooks are configured
// now — without running any chain again: authenticity replaces verification. Which entries it
// applies follows the rule of undo.Restorable: all of them when the kind's Update chain of the
// same side has every hook of the chain that wrote them (same names, same revisions — config
// entry, build: its next write puts the change back), otherwise only those the apiserver lets the syncer change back on an
// update (labels, annotations, Secret and ConfigMap data). A value that does not open is
// dropped and counted (unauthentic); a tenant cannot make one that opens.
//
// A clear-text undo (releases before sealing, or synchook without a key) is trusted only on a
// kind whose writes all pass through synchook — both its Create and its Update chain of that
// side record undo — and only when it verifies by re-running the write chain (undo.go), as
// before. Without a key, an undo that would hold a Secret's value is not written at all: the
// change is refused (ErrUndoNeedsKey).
//
// No nesting: a write that brings an undo synchook wrote (sealed and authentic; without a key,
// any well-formed clear-text undo) applies it first, under the same rule, and records only the
// new change, so an undo never contains an older one and its size never grows with config
// changes. Only a value synchook cannot have written is recorded as the tenant's own.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// ErrUndoNeedsKey is the cause of a HookError when synchook has no undo key and the undo of a
// chain's change would hold a value of a Secret: the change is refused (422) rather than
// written to the host in clear text. Give synchook a key (serve/mutate --undo-key-file; as a
// vcluster plugin v2 it manages one in the host namespace).
var ErrUndoNeedsKey = errors.New("the undo of this change would hold a Secret value in clear text: give synchook an undo key " +
	"(--undo-key-file, or run it as a vcluster plugin v2 with access to its host namespace)")

// More reasons for which a read drops an UndoAnnotation (UndoObserver).
const (
	// UndoUnauthentic: a sealed value that does not open with synchook's keys for this object
	// (forged by a tenant, copied from another object, or sealed with a key since removed).
	UndoUnauthentic = "unauthentic"
	// UndoNoKey: a sealed value while synchook holds no key.
	UndoNoKey = "no_key"
	// UndoUntrusted: a clear-text value on a kind whose writes do not all pass through
	// synchook's undo-recording chains (a Create-only hook): a tenant could have written it.
	UndoUntrusted = "untrusted"
	// UndoClearText: a value that is not sealed (clear text, from a tenant or from a build
	// before the one rule): tenant data, never applied.
	UndoClearText = "clear_text"
)

// ring returns the key ring in use, or nil without a key.
func (r *Registry) ring() *undo.Ring { return r.opts.Keys.Ring() }

// sideOf returns the cluster the objects of hook type t live in.
func sideOf(t hooks.HookType) undo.Side {
	if strings.HasSuffix(string(t), "Virtual") {
		return undo.Virtual
	}
	return undo.Physical
}

// updateType returns the Update hook type of the side of t.
func updateType(t hooks.HookType) hooks.HookType {
	if sideOf(t) == undo.Virtual {
		return hooks.UpdateVirtual
	}
	return hooks.UpdatePhysical
}

// objectIdentity returns the identity a sealed undo of the JSON object raw of kind gvk is bound
// to: gvk's apiVersion and kind (checkInput made sure the object says the same), its
// namespace and name.
func objectIdentity(gvk schema.GroupVersionKind, raw []byte) undo.Identity {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	id := undo.Identity{APIVersion: apiVersion, Kind: kind}
	meta, _, ok := jsonscan.Find(raw, "metadata")
	if !ok {
		return id
	}
	str := func(key string) string {
		m, _, ok := jsonscan.Find(meta.Value, key)
		var s string
		if ok && json.Unmarshal(m.Value, &s) == nil {
			return s
		}
		return ""
	}
	id.Namespace, id.Name = str("namespace"), str("name")
	return id
}

// hookDigest returns the fingerprint of one hook of a write chain (its name and revision),
// which a sealed undo lists for every hook of the chain that recorded it (undo.Record.Writers).
func hookDigest(name, revision string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s;%d:%s;", len(name), name, len(revision), revision))
	return hex.EncodeToString(sum[:4])
}

// sealUndo returns the annotation value for entries recorded by the write chain c on the
// object raw (either side of the change: identity never changes): sealed with the newest key,
// or in clear text without a key or with clear (the runs that verify a clear-text undo). Errors: ErrUndoTooLarge past MaxUndoBytes (counted as
// stored), ErrUndoNeedsKey for a clear-text undo that would hold a Secret value.
func (r *Registry) sealUndo(c *chain, raw []byte, entries []UndoEntry, clear bool, carry []UndoEntry) (string, error) {
	return r.sealUndoAs(c, func() undo.Identity { return objectIdentity(c.key.GVK, raw) }, entries, clear, carry)
}

// sealUndoFor is sealUndo for an object whose identity is known (the label/annotation fast
// path has it from its own parse).
func (r *Registry) sealUndoFor(c *chain, id undo.Identity, entries []UndoEntry, clear bool, carry []UndoEntry) (string, error) {
	return r.sealUndoAs(c, func() undo.Identity { return id }, entries, clear, carry)
}

// sealUndoAs is sealUndo with the object's identity from id, which is called only to seal.
func (r *Registry) sealUndoAs(c *chain, id func() undo.Identity, entries []UndoEntry, clear bool, carry []UndoEntry) (string, error) {
	if len(carry) > 0 && !clear && r.ring() != nil {
		entries = append(slices.Clip(carry), entries...)
	}
	rec := undo.Record{Writers: c.writers, Entries: entries}
	var (
		value string
		err   error
	)
	if ring := r.ring(); ring != nil && !clear {
		value, err = ring.Seal(id(), sideOf(c.key.Type), rec)
		r.opts.Keys.NoteSealed(c.key.GVK, sideOf(c.key.Type))
	} else {
		if path := secretValuePath(c.key.GVK, entries); path != "" {
			return "", fmt.Errorf("%w (at %s)", ErrUndoNeedsKey, path)
		}
		value, err = rec.Clear()
	}
	if err != nil {
		return "", err
	}
	if len(value) > r.opts.MaxUndoBytes {
		return "", fmt.Errorf("%w: %d bytes as stored, the limit is %d", ErrUndoTooLarge, len(value), r.opts.MaxUndoBytes)
	}
	return value, nil
}

// secretValuePath returns the path of the first entry of an undo of a Secret that could hold
// a value of the Secret (anything but a label, or an annotation other than kubectl's
// last-applied-configuration, which holds the data), or "".
func secretValuePath(gvk schema.GroupVersionKind, entries []UndoEntry) string {
	if gvk.Group != "" || gvk.Kind != "Secret" && gvk.Kind != "SecretList" {
		return ""
	}
	for _, e := range entries {
		tokens, err := patch.ParsePointer(e.Path)
		if err != nil || len(tokens) < 2 || tokens[0] != "metadata" {
			return e.Path
		}
		switch {
		case tokens[1] == "labels":
		case tokens[1] == "annotations" && len(tokens) == 3 && tokens[2] != "kubectl.kubernetes.io/last-applied-configuration":
		case tokens[1] == "annotations" && len(tokens) == 2 && e.Original == nil:
		default:
			return e.Path
		}
	}
	return ""
}

// undoPlan is what a read or a write makes of an UndoAnnotation value: the steps to apply, or
// why it is dropped; verify says it is a clear-text undo that must verify first (undo.go).
type undoPlan struct {
	steps  []undoStep
	verify bool
	reason string
	// carry are the sealed undo's entries the rule does not let a view apply (an update
	// cannot change them back) and the object still holds: they stay recorded, marked Kept,
	// on the view's undo and on every later write's, so they are never lost.
	carry []UndoEntry
}

// planUndo decides what the read chain c does with the UndoAnnotation value found on raw.
func (r *Registry) planUndo(c *chain, raw []byte, value string) undoPlan {
	if len(value) > r.opts.MaxUndoBytes {
		return undoPlan{reason: UndoTooLarge}
	}
	if undo.IsSealed(value) {
		return r.planSealed(c, raw, value)
	}
	if !r.clearTrusted(c.key) {
		return undoPlan{reason: UndoUntrusted}
	}
	rec, err := undo.ParseClear(value)
	if err != nil {
		return undoPlan{reason: UndoMalformed}
	}
	steps, reason := parseSteps(rec.Entries)
	return undoPlan{steps: steps, verify: true, reason: reason}
}

// planSealed opens a sealed value and keeps the steps the rule lets a read apply.
func (r *Registry) planSealed(c *chain, raw []byte, value string) undoPlan {
	rec, reason := r.openSealed(c.key.GVK, sideOf(c.key.Type), raw, value)
	if reason != "" {
		return undoPlan{reason: reason}
	}
	steps, reason := parseSteps(rec.Entries)
	if reason != "" {
		return undoPlan{reason: reason}
	}
	all := r.rewrites(c.key, rec.Writers)
	immutable := isImmutable(raw)
	var (
		apply []undoStep
		carry []UndoEntry
		tree  any // raw decoded, once, when an entry is to be carried
	)
	for _, s := range steps {
		if all && !s.entry.Kept || undo.Restorable(c.key.GVK, s.tokens) && (!immutable || s.tokens[0] == "metadata") {
			apply = append(apply, s)
			continue
		}
		if tree == nil {
			if tree, _ = decodeTree(raw); tree == nil {
				continue
			}
		}
		if s.entry.Op == undo.OpInsert || holds(tree, s.tokens, s.entry.Hooked) {
			e := s.entry
			e.Kept = true
			carry = append(carry, e)
		}
	}
	return undoPlan{steps: apply, carry: carry}
}

// openSealed opens the sealed value found on the object raw of kind gvk on side with the
// Registry's keys, or returns why it is dropped: no_key, malformed or unauthentic.
func (r *Registry) openSealed(gvk schema.GroupVersionKind, side undo.Side, raw []byte, value string) (undo.Record, string) {
	ring := r.ring()
	if ring == nil {
		return undo.Record{}, UndoNoKey
	}
	rec, _, err := ring.Open(objectIdentity(gvk, raw), side, value)
	switch {
	case errors.Is(err, undo.ErrMalformed):
		return undo.Record{}, UndoMalformed
	case err != nil:
		return undo.Record{}, UndoUnauthentic
	}
	return rec, ""
}

// carried returns the entries to record before a write's own: the kept entries of the undo
// the write brought (ownUndo), none in the runs that verify a clear-text undo.
func (rn *call) carried() []UndoEntry {
	if rn.clearUndo {
		return nil
	}
	return rn.carry
}

// rewrites reports whether the Update chain of the side of key records undo and has every
// hook of writers (same name, same revision): its next write puts back whatever the undo takes
// off.
func (r *Registry) rewrites(key Key, writers []string) bool {
	wc := r.chains[Key{GVK: key.GVK, Type: updateType(key.Type)}]
	if wc == nil || !r.recordsUndo(wc) || len(writers) == 0 {
		return false
	}
	for _, w := range writers {
		if !slices.Contains(wc.writers, w) {
			return false
		}
	}
	return true
}

// clearTrusted reports whether a clear-text undo may be trusted (after it verifies) on the
// kind and side of key: both its Create and its Update chain record undo, so every write of
// the kind passes through synchook, which removes whatever a tenant wrote there.
func (r *Registry) clearTrusted(key Key) bool {
	for _, t := range undoWriters[readType(key.Type)] {
		wc := r.chains[Key{GVK: key.GVK, Type: t}]
		if wc == nil || !r.recordsUndo(wc) {
			return false
		}
	}
	return true
}

// readType returns the read hook type of the side of t.
func readType(t hooks.HookType) hooks.HookType {
	if sideOf(t) == undo.Virtual {
		return hooks.GetVirtual
	}
	return hooks.GetPhysical
}

// isImmutable reports whether the JSON object raw says immutable: true (a Secret or ConfigMap
// whose data the apiserver will not let anyone change).
func isImmutable(raw []byte) bool {
	m, _, ok := jsonscan.Find(raw, "immutable")
	return ok && string(m.Value) == "true"
}

// parseSteps returns the entries with their paths parsed, or the reason to drop them all: a
// malformed path or one that addresses identity.
func parseSteps(entries []UndoEntry) ([]undoStep, string) {
	steps := make([]undoStep, len(entries))
	for i, e := range entries {
		tokens, err := patch.ParsePointer(e.Path)
		if err != nil || len(tokens) == 0 {
			return nil, UndoMalformed
		}
		if patch.ProtectedField(e.Path) != "" {
			return nil, UndoIdentity
		}
		steps[i] = undoStep{entry: e, tokens: tokens}
	}
	return steps, ""
}

// undoMarker is how a JSON object that carries an UndoAnnotation contains its key: a cheap
// test before looking for it.
var undoMarker = []byte(`"` + UndoAnnotation + `"`)

// ownUndo returns, for the write chain c and the object raw it is given, the undo synchook
// itself wrote there earlier (a sealed value that opens; without a key, a well-formed
// clear-text value whose every entry still fits the object, and a sealed value it cannot
// open, which it drops), with the steps the rule lets it apply. ok is false when raw carries no such undo: a value a tenant wrote is
// then recorded as the tenant's own.
func (r *Registry) ownUndo(c *chain, raw []byte) (steps []undoStep, carry []UndoEntry, ok bool) {
	if !bytes.Contains(raw, undoMarker) {
		return nil, nil, false
	}
	value, had := undoAnnotation(raw)
	if !had || len(value) > r.opts.MaxUndoBytes {
		return nil, nil, false
	}
	readKey := Key{GVK: c.key.GVK, Type: readType(c.key.Type)}
	ring := r.ring()
	switch {
	case undo.IsSealed(value) && ring == nil:
		return nil, nil, true // cannot be applied; never recorded as the tenant's own
	case undo.IsSealed(value):
		p := r.planSealed(&chain{key: readKey}, raw, value)
		return p.steps, p.carry, p.reason == ""
	case ring != nil:
		return nil, nil, false
	}
	rec, err := undo.ParseClear(value)
	if err != nil || len(rec.Entries) == 0 {
		return nil, nil, false
	}
	steps, reason := parseSteps(rec.Entries)
	if reason != "" {
		return nil, nil, false
	}
	// Without a key, a clear-text undo is taken as synchook's own only when the object still
	// holds everything it says the hooks wrote: a stale undo of an earlier config, which the
	// read showed because it no longer verified. A tenant's value that does not fit the object
	// is the tenant's own.
	tree, err := decodeTree(raw)
	if err != nil {
		return nil, nil, false
	}
	for _, s := range steps {
		if s.entry.Op == undo.OpInsert {
			continue // the element is gone: nothing on the object to compare
		}
		cur, has := lookupTree(tree, s.tokens)
		if m, ok := cur.(map[string]any); ok && len(s.tokens) == 2 && s.tokens[1] == "annotations" {
			m = maps.Clone(m) // the map as the hooks left it: before the undo was added
			delete(m, UndoAnnotation)
			cur = m
		}
		if has != (s.entry.Hooked != nil) {
			return nil, nil, false
		}
		var hooked any
		if has && (decodeValue(s.entry.Hooked, &hooked) != nil || !reflect.DeepEqual(cur, hooked)) {
			return nil, nil, false
		}
	}
	return steps, nil, true
}
