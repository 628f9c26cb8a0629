package undo

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/patch"
)

// Doc is a document Apply edits: a jsondoc.Doc (the request's object, split only where the
// steps go), or the labels and annotations of an object alone (package engine's
// label/annotation fast path). Values are JSON decoded as encoding/json decodes into any, with
// numbers as json.Number (strings, json.Number, bools, nil, map[string]any, []any).
type Doc interface {
	// Lookup returns the value at the reference tokens.
	Lookup(tokens []string) (any, bool)
	// Kind returns the first byte of the JSON value at tokens ('{', '[', '"', 'n', 't', 'f',
	// a digit or '-'), without decoding it; false when there is none.
	Kind(tokens []string) (byte, bool)
	// Set sets the value at tokens as RFC 6902's add does; false when the parent does not
	// exist, an error when the document cannot hold v there (then the undo is not applied).
	Set(tokens []string, v any) (bool, error)
	// Remove removes the value at tokens; false when there is none.
	Remove(tokens []string) bool
	// IsArrayIndex reports whether tokens address an index of an array.
	IsArrayIndex(tokens []string) bool
}

// annotationTokens address the Annotation in an object.
var annotationTokens = []string{"metadata", "annotations", Annotation}

// The reasons for which Apply leaves one entry out (Result.Skipped; counted by
// synchook_undo_entries_skipped_total{reason}). None of them stops the other entries.
const (
	// SkipChanged: the path no longer holds what the hooks wrote; the host (its defaults, its
	// admission) or a later write changed it, and what it holds now stays.
	SkipChanged = "changed"
	// SkipHeld: the element to insert again is already in the stored array: the host added an
	// equal one on its own (DefaultTolerationSeconds' tolerations after a strip of them all).
	SkipHeld = "held"
	// SkipNoPlace: the value's place is gone and cannot be made again: an ancestor is a value
	// that is not an object, or an element of an array that is not there.
	SkipNoPlace = "no_place"
)

// Result is what Apply did: Reason, why the steps could not be applied at all (ReasonMalformed:
// the document has no Annotation or cannot hold a value; ReasonDeadline: the context ended),
// the document then being half-edited; "" otherwise. Skipped counts the entries left out, by
// skip reason (nil when none was).
type Result struct {
	Reason  string
	Skipped map[string]int
}

func (r *Result) skip(reason string) {
	if r.Skipped == nil {
		r.Skipped = make(map[string]int, 1)
	}
	r.Skipped[reason]++
}

// Restore is Apply onto doc, a whole object, checking that its edits keep identity (a plan
// refuses identity paths, so that check cannot fail unless a plan is bypassed): the one way
// a plan's steps are applied to an object before a write (an Update's own undo), on a read
// and in cleanup. Result.Reason says why it did not finish (ReasonDeadline, ReasonMalformed,
// ReasonIdentity); doc is then half-edited and must be dropped.
func Restore(ctx context.Context, doc *jsondoc.Doc, steps []Step) Result {
	res := Apply(ctx, doc, steps)
	if res.Reason == "" && patch.Guard("", doc.Ops()) != nil {
		res.Reason = ReasonIdentity
	}
	return res
}

// Apply is the one applier: it removes the Annotation from doc and applies steps (a Plan's)
// in reverse order, the order that takes back a change recorded in order, onto the object as
// the host stores it, which is not always what the hooks' write produced:
//
//   - where the hooks removed or emptied a whole map or list and the host filled it again (a
//     host toleration, label or annotation), the syncer's members and elements go back into
//     the host's, by the rules below for each;
//   - an entry applies only where doc still holds what the hooks wrote, never forced; an empty
//     object or array the hooks wrote counts as held where doc has no value there, since the
//     apiserver stores an empty omitempty map or list as absent (Secret data: {} after a strip
//     of its only key). Anything else there (the host changed it) stays: SkipChanged;
//   - where the hooks made a value where there was none (a map or list they created), the
//     read takes back what they wrote and keeps what the host added since (takeBack): the
//     value goes only when nothing else is left in it, and a member the host holds with
//     another value stays (SkipChanged). The sealed record is the same as before (an entry
//     with no Original): undos sealed by earlier builds apply by this rule too;
//   - a value whose parent the apiserver dropped (it was left empty) is restored into a new
//     empty parent: an array for an element (OpInsert), else an object, with any missing
//     object above it; where an ancestor is not an object (or a missing array element), the
//     entry is left out: SkipNoPlace;
//   - an element to insert again is not inserted twice where the host added an equal one on
//     its own (SkipHeld): the array is longer than the hooks wrote it (Entry.Len), and one of
//     the elements it has beyond that length at its end (the host's additions) is equal and
//     not matched yet; an equal element the hooks left in place is not the host's. The host's element is
//     moved to the index the syncer had it at (when it is after it), so the read keeps the
//     syncer's order. An index past the end of the array, as the host left it, appends.
func Apply(ctx context.Context, doc Doc, steps []Step) Result {
	if !doc.Remove(annotationTokens) {
		return Result{Reason: ReasonMalformed}
	}
	var (
		res  Result
		held *heldArray     // the array a run of inserts goes into, as stored
		lens map[string]int // Entry.Len of each array that has one
	)
	for _, s := range steps {
		if s.Len != nil {
			if lens == nil {
				lens = map[string]int{}
			}
			lens[parentPath(s.Path)] = *s.Len
		}
	}
	for i, s := range slices.Backward(steps) {
		if i%64 == 0 && ctx.Err() != nil {
			return Result{Reason: ReasonDeadline}
		}
		var hooked, original any
		var err error
		if s.Hooked != nil {
			if hooked, err = jsondoc.Decode(s.Hooked); err != nil {
				return Result{Reason: ReasonMalformed}
			}
		}
		if s.Original != nil {
			if original, err = jsondoc.Decode(s.Original); err != nil {
				return Result{Reason: ReasonMalformed}
			}
		}
		if s.Op != OpInsert {
			held = nil // the array may change under other steps: a later run looks again
		}
		switch s.Op {
		case OpInsert: // the hooks removed an element: insert it again
			if s.Original == nil {
				res.skip(SkipNoPlace)
				continue
			}
			skip, err := insert(doc, &held, lens, s, original)
			if err != nil {
				return Result{Reason: ReasonMalformed}
			}
			if skip != "" {
				res.skip(skip)
			}
			continue
		case OpRemove: // the hooks inserted an element: remove it if it is still there
			if cur, has := doc.Lookup(s.Tokens); has && doc.IsArrayIndex(s.Tokens) && reflect.DeepEqual(cur, hooked) {
				doc.Remove(s.Tokens)
			} else {
				res.skip(SkipChanged)
			}
			continue
		}
		cur, has := doc.Lookup(s.Tokens)
		if has && s.Hooked == nil && isEmptyAnnotations(s.Tokens, cur) {
			has = false // only the undo annotation was there: the hooks had removed the map
		}
		if has && s.Original != nil && (s.Hooked == nil || isEmptyContainer(hooked)) {
			// The hooks emptied or removed a whole map or list and the host filled it again:
			// each of the syncer's members or elements goes back into the host's.
			done, err := refill(doc, &held, &lens, s, cur, original, &res)
			if err != nil {
				return Result{Reason: ReasonMalformed}
			}
			if done {
				continue
			}
		}
		if s.Original == nil && s.Hooked != nil && has {
			// The hooks made this value where there was none: what they wrote comes off, what
			// the host added since stays.
			rest, gone, changed := takeBack(cur, hooked)
			if changed {
				res.skip(SkipChanged)
			}
			if gone {
				doc.Remove(s.Tokens)
			} else if !reflect.DeepEqual(rest, cur) {
				if _, err := doc.Set(s.Tokens, rest); err != nil {
					return Result{Reason: ReasonMalformed}
				}
			}
			continue
		}
		if !heldAs(cur, has, hooked, s.Hooked != nil) {
			res.skip(SkipChanged)
			continue
		}
		if s.Original == nil {
			if has {
				doc.Remove(s.Tokens)
			}
			continue
		}
		if has && doc.IsArrayIndex(s.Tokens) {
			doc.Remove(s.Tokens) // the hooks replaced this element: put it back in its place (Set inserts)
		}
		skip, err := place(doc, s.Tokens, original, false)
		if err != nil {
			return Result{Reason: ReasonMalformed}
		}
		if skip != "" {
			res.skip(skip)
		}
	}
	return res
}

// refill restores step s, whose hooks left nothing (or an empty map or list) where the syncer
// sent the map or list original, into cur, the map or list the host put there since: each
// member of original that cur lacks is set (one cur holds with another value is the host's:
// SkipChanged), each element is inserted as an OpInsert of a list the hooks wrote empty (an
// equal one the host added is matched, SkipHeld). done is false when cur and original are not
// both maps or both lists (the caller's rule applies).
func refill(doc Doc, held **heldArray, lens *map[string]int, s Step, cur, original any, res *Result) (done bool, err error) {
	switch o := original.(type) {
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return false, nil
		}
		for _, k := range slices.Sorted(maps.Keys(o)) {
			if v, has := c[k]; has {
				if !reflect.DeepEqual(v, o[k]) {
					res.skip(SkipChanged)
				}
				continue
			}
			if _, err := doc.Set(append(slices.Clip(s.Tokens), k), o[k]); err != nil {
				return true, err
			}
		}
		return true, nil
	case []any:
		if _, ok := cur.([]any); !ok {
			return false, nil
		}
		if *lens == nil {
			*lens = map[string]int{}
		}
		(*lens)[s.Path] = 0
		for k, e := range o {
			el := Step{Entry: Entry{Op: OpInsert, Path: s.Path + "/" + strconv.Itoa(k)}, Tokens: append(slices.Clip(s.Tokens), strconv.Itoa(k))}
			skip, err := insert(doc, held, *lens, el, e)
			if err != nil {
				return true, err
			}
			if skip != "" {
				res.skip(skip)
			}
		}
		*held = nil
		return true, nil
	}
	return false, nil
}

// takeBack returns cur, the value stored at a path where the hooks made hooked (nothing was
// there before), without what the hooks wrote: of a map, each member the hooks wrote, taken
// back in turn (a member left empty by that goes, one the host gave another value stays:
// changed); of a list, each element the hooks wrote, matched with the first stored element that
// holds every field the hooks wrote in it (covers: an element the host defaulted fields into is
// still the hooks' element, and goes whole); a scalar goes when it is what the hooks wrote, else
// stays (changed). gone reports that nothing but what the hooks wrote was there: the value
// itself goes, as without synchook it would not exist. changed reports that some value the
// hooks wrote is held with another value.
func takeBack(cur, hooked any) (rest any, gone, changed bool) {
	switch h := hooked.(type) {
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return cur, false, true
		}
		out := maps.Clone(c)
		for k, hv := range h {
			cv, has := out[k]
			if !has {
				continue // the host dropped it: nothing to take back
			}
			r, g, ch := takeBack(cv, hv)
			changed = changed || ch
			if g {
				delete(out, k)
			} else {
				out[k] = r
			}
		}
		return out, len(out) == 0, changed
	case []any:
		c, ok := cur.([]any)
		if !ok {
			return cur, false, true
		}
		taken, all := matchElements(c, h)
		changed = changed || !all
		out := make([]any, 0, len(c))
		for j, ce := range c {
			if !taken[j] {
				out = append(out, ce)
			}
		}
		return out, len(out) == 0, changed
	}
	if reflect.DeepEqual(cur, hooked) {
		return nil, true, false
	}
	return cur, false, true
}

// covers reports whether cur holds everything of hooked: every member of a map (recursively),
// every element of a list matched by a distinct element of cur, a scalar equal.
func covers(cur, hooked any) bool {
	switch h := hooked.(type) {
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		for k, hv := range h {
			if cv, has := c[k]; !has || !covers(cv, hv) {
				return false
			}
		}
		return true
	case []any:
		c, ok := cur.([]any)
		if !ok {
			return false
		}
		_, all := matchElements(c, h)
		return all
	}
	return reflect.DeepEqual(cur, hooked)
}

// matchElements matches each element of hooked with the first element of cur not matched yet
// that covers it: taken marks cur's matched elements; all reports that every element of
// hooked found one.
func matchElements(cur, hooked []any) (taken []bool, all bool) {
	taken, all = make([]bool, len(cur)), true
	for _, he := range hooked {
		found := false
		for j, ce := range cur {
			if !taken[j] && covers(ce, he) {
				taken[j], found = true, true
				break
			}
		}
		all = all && found
	}
	return taken, all
}

// heldAs reports whether a document that has (has) the value cur at a path holds what the
// hooks wrote there (hooked; wrote false: they removed it). An empty object or array they
// wrote is held where there is no value: the apiserver drops empty omitempty maps and lists.
func heldAs(cur any, has bool, hooked any, wrote bool) bool {
	switch {
	case has && wrote:
		return reflect.DeepEqual(cur, hooked)
	case !has && wrote:
		return isEmptyContainer(hooked)
	}
	return has == wrote
}

// isEmptyContainer reports whether v is {} or [].
func isEmptyContainer(v any) bool {
	switch c := v.(type) {
	case map[string]any:
		return len(c) == 0
	case []any:
		return len(c) == 0
	}
	return false
}

// place sets v at tokens (Doc.Set), first making the parent again where the host dropped it:
// an empty array when array, else an empty object, and any missing object above it. It returns
// SkipNoPlace when the place cannot be made (the deepest ancestor that exists is not an
// object, or the parent that exists is not a container that takes tokens' last token).
func place(doc Doc, tokens []string, v any, array bool) (string, error) {
	if ok, err := doc.Set(tokens, v); ok || err != nil {
		return "", err
	}
	parent := tokens[:len(tokens)-1]
	have := len(parent) // the number of tokens of the deepest ancestor that exists
	for ; have > 0; have-- {
		if _, ok := doc.Kind(parent[:have]); ok {
			break
		}
	}
	if have == len(parent) {
		return SkipNoPlace, nil // the parent is there: it does not take this token
	}
	if k, ok := doc.Kind(parent[:have]); have > 0 && (!ok || k != '{') {
		return SkipNoPlace, nil // a new member cannot go into an array or a scalar
	}
	for d := have + 1; d <= len(parent); d++ {
		var empty any = map[string]any{}
		if d == len(parent) && array {
			empty = []any{}
		}
		if ok, err := doc.Set(parent[:d], empty); !ok || err != nil {
			return SkipNoPlace, err
		}
	}
	if ok, err := doc.Set(tokens, v); !ok || err != nil {
		return SkipNoPlace, err
	}
	return "", nil
}

// heldArray is the array a run of inserts (OpInsert steps, applied one after the other) goes
// into: its path, its length now, how many elements the host added to it and are not matched
// yet (the stored length less the length the hooks wrote, Entry.Len) and, while that is not 0,
// its elements now: the host's additions (taken to be the stored array's last elements, where
// admission plugins and "add /-" patches put them) by canonical JSON, "" (placed) for the
// others and for those the run inserted or matched.
type heldArray struct {
	parent string
	n      int
	added  int
	elems  []string
}

// placed marks an element of heldArray.elems that the run inserted or matched.
const placed = ""

// insert applies one OpInsert step s: the element v at its index. Where the host added an
// equal element to the stored array (an equal element not yet matched, and fewer matched than
// the host added), that element is taken as v (SkipHeld) and moved to v's index when it is
// after it, so the list reads in the syncer's order with the host's other additions where the
// host put them. An index past the end appends; a missing array is made again (place). *cur is
// the run's array, replaced when the step goes elsewhere.
func insert(doc Doc, cur **heldArray, lens map[string]int, s Step, v any) (string, error) {
	tokens := s.Tokens
	parent := tokens[:len(tokens)-1]
	h := *cur
	if h == nil || h.parent != parentPath(s.Path) {
		h = &heldArray{parent: parentPath(s.Path)}
		stored, has := doc.Lookup(parent)
		if has {
			a, ok := stored.([]any)
			if !ok {
				*cur = nil
				return SkipNoPlace, nil
			}
			h.n, h.added = len(a), len(a)
			if n, ok := lens[h.parent]; ok {
				h.added = max(0, len(a)-n)
			}
			if h.added > 0 { // the host's additions are its last elements
				h.elems = make([]string, len(a))
				for k := len(a) - h.added; k < len(a); k++ {
					h.elems[k] = canonical(a[k])
				}
			}
		}
		*cur = h
	}
	last := tokens[len(tokens)-1]
	i, err := strconv.Atoi(last)
	if err != nil || i < 0 || last != strconv.Itoa(i) {
		return SkipNoPlace, nil
	}
	i = min(i, h.n)
	at := func(k int) []string { return append(slices.Clip(parent), strconv.Itoa(k)) }
	var key string
	if h.added > 0 {
		key = canonical(v)
		j := slices.Index(h.elems[i:], key) // first the host's elements from v's place on
		if j >= 0 {
			j += i
		} else {
			j = slices.Index(h.elems[:i], key)
		}
		if j >= 0 {
			h.added--
			if j > i { // move it to v's place
				if !doc.Remove(at(j)) {
					return SkipNoPlace, nil
				}
				if _, err := doc.Set(at(i), v); err != nil {
					return "", err
				}
				h.elems = slices.Insert(slices.Delete(h.elems, j, j+1), i, placed)
			} else {
				h.elems[j] = placed
			}
			return SkipHeld, nil
		}
	}
	skip, err := place(doc, at(i), v, true)
	if skip == "" && err == nil {
		h.n++
		if h.elems != nil {
			h.elems = slices.Insert(h.elems, i, placed)
		}
	}
	return skip, err
}

// parentPath is the JSON Pointer of the parent of the value at the JSON Pointer path.
func parentPath(path string) string {
	return path[:max(0, strings.LastIndexByte(path, '/'))]
}

// canonical is the JSON of a decoded value with object members in sorted order
// (encoding/json sorts map keys), so that equal values have equal text.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "\x00" + err.Error() // never equal to a JSON text
	}
	return string(b)
}

func isEmptyAnnotations(tokens []string, v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0 && len(tokens) == 2 && tokens[0] == "metadata" && tokens[1] == "annotations"
}

// holds reports whether doc holds the JSON value v at tokens (v nil: nothing there), an empty
// object or array v also where doc has nothing (Apply's rule for what the hooks wrote).
func holds(doc Doc, tokens []string, v []byte) bool {
	cur, has := doc.Lookup(tokens)
	if v == nil {
		return !has
	}
	want, err := jsondoc.Decode(v)
	return err == nil && heldAs(cur, has, want, true)
}
