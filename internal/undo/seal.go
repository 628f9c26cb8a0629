package undo

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/jsonscan"
)

// ErrNeedsKey is why a write that would record an undo fails when synchook holds no undo key
// (a vcluster plugin v2 before its key Secret could be read): the write is refused
// (transports answer it as a failed precondition; vcluster retries) rather than written with
// an undo no read could trust.
var ErrNeedsKey = errors.New("no undo key loaded yet: a hooked write cannot record its undo")

// ErrTooLarge is why a write fails when its undo, sealed, would be longer than Rule.MaxBytes:
// the change is refused (422), since it could not be taken back on the way up.
var ErrTooLarge = errors.New("the change is too large to record its undo")

// WriterDigest returns the fingerprint of one hook of a write chain (its name and revision),
// which a sealed undo lists for every hook of the chain that recorded it (Record.Writers).
func WriterDigest(name, revision string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s;%d:%s;", len(name), name, len(revision), revision))
	return hex.EncodeToString(sum[:4])
}

// Seal returns the Annotation value that records entries, written by a chain whose hooks have
// the fingerprints writers (WriterDigest), on the object id on side, after the carried
// entries carry (Plan.Carry of the undo applied first): sealed with the Ring's newest key.
// Errors: ErrNeedsKey without a Ring, ErrTooLarge past MaxBytes (as stored).
func (r Rule) Seal(id Identity, side Side, writers []string, entries, carry []Entry) (string, error) {
	if r.Ring == nil {
		return "", ErrNeedsKey
	}
	if len(carry) > 0 {
		entries = append(slices.Clip(carry), entries...)
	}
	value, err := r.Ring.Seal(id, side, Record{Writers: writers, Entries: entries})
	if err != nil {
		return "", err
	}
	if len(value) > r.MaxBytes {
		return "", fmt.Errorf("%w: %d bytes as stored, the limit is %d", ErrTooLarge, len(value), r.MaxBytes)
	}
	return value, nil
}

// Opened returns the entries of the undo that the JSON object raw of kind gvk on side carries,
// opened under the one rule (its size, seal and identity checks, as a read of that side
// applies it), and whether raw carries an Annotation at all. Errors: why the value is not
// applied (a Reason: clear text, another object's seal, an unknown key, …). For tools that
// show or compare an undo by what it holds, never by its bytes (`synchook test`).
func (r Rule) Opened(gvk schema.GroupVersionKind, side Side, raw []byte) (entries []Entry, had bool, err error) {
	m, _, ok := jsonscan.Find(raw, "metadata")
	if !ok {
		return nil, false, nil
	}
	value, had := AnnotationIn(m.Value)
	if !had {
		return nil, false, nil
	}
	steps, _, reason := r.open(Subject{GVK: gvk, ID: IdentityIn(gvk, side, m.Value), Side: side}, value)
	if reason != "" {
		return nil, true, fmt.Errorf("the undo is not applied: %s", reason)
	}
	entries = make([]Entry, len(steps))
	for i, s := range steps {
		entries[i] = s.Entry
	}
	return entries, true, nil
}
