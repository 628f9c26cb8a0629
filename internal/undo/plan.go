package undo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/patch"
)

// The reasons for which an Annotation value is not applied (Plan.Reason, counted by
// synchook_undo_rejected_total{reason}; `synchook cleanup` lists them).
const (
	// ReasonTooLarge: the value is longer than synchook ever writes (Rule.MaxBytes).
	ReasonTooLarge = "too_large"
	// ReasonClearText: the value is not sealed: tenant data (or a build before the one rule).
	ReasonClearText = "clear_text"
	// ReasonNoKey: a sealed value while synchook holds no key.
	ReasonNoKey = "no_key"
	// ReasonUnauthentic: a sealed value that does not open with synchook's keys for this
	// object (forged, copied from another object or side, a seal of an earlier object of the
	// same name, or sealed with a key since removed).
	ReasonUnauthentic = "unauthentic"
	// ReasonMalformed: the value, an entry's path or value is not in this package's format.
	ReasonMalformed = "malformed"
	// ReasonIdentity: an entry would touch apiVersion, kind, name, namespace or uid.
	ReasonIdentity = "identity"
	// ReasonDeadline: the request ended before the undo was applied.
	ReasonDeadline = "deadline"
)

// Step is an Entry with its path parsed into reference tokens.
type Step struct {
	Entry
	Tokens []string
}

// Subject is the stored object an Annotation value was found on, as a plan needs it.
type Subject struct {
	// GVK is its kind (undo.Restorable's rule depends on it).
	GVK schema.GroupVersionKind
	// ID and Side are what the value must be sealed for.
	ID   Identity
	Side Side
	// Immutable says the object is an immutable Secret or ConfigMap (immutable: true): only
	// its metadata can change back.
	Immutable bool
	// Doc returns the object as a Doc, for the entries a plan carries or lists (called at
	// most once, and only then).
	Doc func() (Doc, error)
}

// Rule is the one rule's inputs besides the object: an undo is applied only if it is sealed
// and opens under Ring for the Subject (its identity, side and binding: Ring.Open), and at
// most MaxBytes long.
type Rule struct {
	Ring     *Ring
	MaxBytes int
	// Rewriters are the writer fingerprints (WriterDigest) of the kind's Update chain of the
	// Subject's side, when that chain records an undo (nil: none). A record whose Writers are
	// all among them is put back whole by that chain's next write: a read may take every entry
	// off; otherwise only the Restorable ones.
	Rewriters []string
}

// rewrites reports whether the kind's Update chain (Rule.Rewriters) puts back on its next
// write the change of a chain with the fingerprints writers (none: it cannot know, so false).
func (r Rule) rewrites(writers []string) bool {
	if len(r.Rewriters) == 0 || len(writers) == 0 {
		return false
	}
	for _, w := range writers {
		if !slices.Contains(r.Rewriters, w) {
			return false
		}
	}
	return true
}

// Plan is what a read (or an Update's own-undo step) may apply of an Annotation value: Steps,
// for Apply; Carry, the entries left on the object (it still holds what the hooks wrote and
// an update could not change them back), marked Kept, to record again; or Reason, why
// nothing is applied.
type Plan struct {
	Steps  []Step
	Carry  []Entry
	Reason string
}

// open is the one rule: the record sealed in value for s, with its steps parsed, or why it is
// not applied.
func (r Rule) open(s Subject, value string) ([]Step, Record, string) {
	switch {
	case len(value) > r.MaxBytes:
		return nil, Record{}, ReasonTooLarge
	case !IsSealed(value):
		return nil, Record{}, ReasonClearText
	case r.Ring == nil:
		return nil, Record{}, ReasonNoKey
	}
	rec, _, err := r.Ring.Open(s.ID, s.Side, value)
	switch {
	case errors.Is(err, ErrMalformed):
		return nil, Record{}, ReasonMalformed
	case err != nil:
		return nil, Record{}, ReasonUnauthentic
	}
	steps, reason := parseSteps(rec.Entries)
	return steps, rec, reason
}

// PlanRead is the read plan: what a read view of s may apply of value. Every entry when the
// kind's Update chain rewrites them (Rule.Rewriters) and the entry is not Kept; else only the
// Restorable ones (and on an immutable object only those in metadata); the others, where the
// object still holds what the hooks wrote, are carried.
func (r Rule) PlanRead(s Subject, value string) Plan {
	steps, rec, reason := r.open(s, value)
	if reason != "" {
		return Plan{Reason: reason}
	}
	all := r.rewrites(rec.Writers)
	var (
		p      Plan
		doc    Doc
		docErr error // s.Doc is asked once
	)
	for _, st := range steps {
		if all && !st.Kept || restorableOn(s, st.Tokens) {
			p.Steps = append(p.Steps, st)
			continue
		}
		if doc == nil && docErr == nil {
			doc, docErr = s.Doc()
		}
		if docErr != nil {
			continue
		}
		if st.Op == OpInsert || holds(doc, st.Tokens, st.Hooked) {
			e := st.Entry
			e.Kept = true
			p.Carry = append(p.Carry, e)
		}
	}
	return p
}

// PlanWrite is the write plan: the undo synchook wrote earlier on the object an Update brings
// (applied first, so that the new undo records only the new change and never nests the old
// one), as PlanRead of the same side gives it. ok is false on a Create (a legitimate Create
// never carries synchook's seal) and whenever PlanRead gives a Reason: the value is then the
// tenant's, recorded like any other.
func (r Rule) PlanWrite(update bool, s Subject, value string) (p Plan, ok bool) {
	if !update {
		return Plan{}, false
	}
	p = r.PlanRead(s, value)
	return p, p.Reason == ""
}

// BeforeWrite is the write plan applied: where the object an Update brings (s, read as doc)
// carries in value an undo synchook wrote (PlanWrite), its steps are applied onto doc
// (Restore), so that the write records only its new change, after the returned carry, and
// never nests the old undo. ok is false, doc untouched, when there is nothing to apply (a
// Create; a value that is the tenant's). Errors: the steps did not apply (ctx ended: wrapping
// ctx.Err()); doc is then half-edited and must be dropped.
func (r Rule) BeforeWrite(ctx context.Context, update bool, s Subject, doc *jsondoc.Doc, value string) (carry []Entry, ok bool, err error) {
	p, ok := r.PlanWrite(update, s, value)
	if !ok {
		return nil, false, nil
	}
	switch res := Restore(ctx, doc, p.Steps); res.Reason {
	case "":
		return p.Carry, true, nil
	case ReasonDeadline:
		return nil, true, fmt.Errorf("restore the earlier undo: %w", ctx.Err())
	default:
		return nil, true, fmt.Errorf("the earlier undo cannot be applied: %s", res.Reason)
	}
}

// View applies the read plan p onto doc, the stored object (Restore), and records the carried
// entries on it again, sealed by reseal (alone, as the kind's Update chain seals them, so that
// a view of an object that holds only these entries is the object itself). Result.Reason
// says why the undo is dropped ("" when it was applied); doc is then half-edited and must be
// dropped. An error of reseal leaves the carried entries unrecorded on the view.
func (p Plan) View(ctx context.Context, doc *jsondoc.Doc, reseal func(carry []Entry) (string, error)) Result {
	res := Restore(ctx, doc, p.Steps)
	if res.Reason != "" || len(p.Carry) == 0 {
		return res
	}
	if value, err := reseal(p.Carry); err == nil && !SetAnnotation(doc, value) {
		res.Reason = ReasonMalformed
	}
	return res
}

// ViewMaps is View for a plan on labels and annotations alone (OnMetadataMaps): Apply on a
// copy of stored (labels, annotations; nil: absent), which it returns as the view; stored
// itself when the undo is dropped (Result.Reason).
func (p Plan) ViewMaps(ctx context.Context, stored [2]map[string]string) ([2]map[string]string, Result) {
	view := metadataMaps{maps.Clone(stored[0]), maps.Clone(stored[1])}
	res := Apply(ctx, &view, p.Steps)
	if res.Reason != "" {
		return stored, res
	}
	return view, res
}

// PlanCleanup is cleanup's plan: with the hooks that wrote value gone, the steps an update may
// change back (Restorable), and the paths of the others that the object does not hold as the
// syncer sent them (left as the hooks wrote them); or why nothing is applied.
func (r Rule) PlanCleanup(s Subject, value string) (apply []Step, unrestored []string, reason string) {
	steps, _, reason := r.open(s, value)
	if reason != "" {
		return nil, nil, reason
	}
	var doc Doc
	for _, st := range steps {
		if restorableOn(s, st.Tokens) {
			apply = append(apply, st)
			continue
		}
		if doc == nil {
			var err error
			if doc, err = s.Doc(); err != nil {
				return nil, nil, ReasonMalformed
			}
		}
		if !holds(doc, st.Tokens, st.Original) {
			unrestored = append(unrestored, st.Path)
		}
	}
	return apply, unrestored, ""
}

// restorableOn is Restorable for s, which refuses data changes when s is immutable.
func restorableOn(s Subject, tokens []string) bool {
	return Restorable(s.GVK, tokens) && (!s.Immutable || tokens[0] == "metadata")
}

// parseSteps returns the entries with their paths parsed, or the reason to drop them all: a
// malformed path or one that addresses identity.
func parseSteps(entries []Entry) ([]Step, string) {
	steps := make([]Step, len(entries))
	for i, e := range entries {
		tokens, err := patch.ParsePointer(e.Path)
		if err != nil || len(tokens) == 0 {
			return nil, ReasonMalformed
		}
		if patch.ProtectedField(e.Path) != "" {
			return nil, ReasonIdentity
		}
		steps[i] = Step{Entry: e, Tokens: tokens}
	}
	return steps, ""
}
