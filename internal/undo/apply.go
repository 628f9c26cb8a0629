package undo

import (
	"context"
	"reflect"
	"slices"

	"github.com/synchook/synchook/internal/jsondoc"
)

// Doc is a document Apply edits: a jsondoc.Doc (the request's object, split only where the
// steps go), or the labels and annotations of an object alone (package engine's
// label/annotation fast path). Values are JSON decoded as encoding/json decodes into any, with
// numbers as json.Number (strings, json.Number, bools, nil, map[string]any, []any).
type Doc interface {
	// Lookup returns the value at the reference tokens.
	Lookup(tokens []string) (any, bool)
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

// Apply is the one applier: it removes the Annotation from doc and applies steps (a Plan's)
// in reverse order, the order that takes back a change recorded in order. An entry applies
// only where doc still holds what the hooks wrote (Entry), never forced: one whose path holds
// something else, or whose parent is gone, is skipped. It returns a reason (ReasonMalformed:
// doc has no Annotation or cannot hold a value; ReasonDeadline: ctx ended) when the steps
// cannot be applied at all, doc then being half-edited; "" otherwise.
func Apply(ctx context.Context, doc Doc, steps []Step) string {
	if !doc.Remove(annotationTokens) {
		return ReasonMalformed
	}
	for i, s := range slices.Backward(steps) {
		if i%64 == 0 && ctx.Err() != nil {
			return ReasonDeadline
		}
		var hooked, original any
		var err error
		if s.Hooked != nil {
			if hooked, err = jsondoc.Decode(s.Hooked); err != nil {
				return ReasonMalformed
			}
		}
		if s.Original != nil {
			if original, err = jsondoc.Decode(s.Original); err != nil {
				return ReasonMalformed
			}
		}
		switch s.Op {
		case OpInsert: // the hooks removed an element: insert it again
			if s.Original != nil && doc.IsArrayIndex(s.Tokens) {
				if _, err := doc.Set(s.Tokens, original); err != nil {
					return ReasonMalformed
				}
			}
			continue
		case OpRemove: // the hooks inserted an element: remove it if it is still there
			if cur, has := doc.Lookup(s.Tokens); has && doc.IsArrayIndex(s.Tokens) && reflect.DeepEqual(cur, hooked) {
				doc.Remove(s.Tokens)
			}
			continue
		}
		cur, has := doc.Lookup(s.Tokens)
		if has && s.Hooked == nil && isEmptyAnnotations(s.Tokens, cur) {
			has = false // only the undo annotation was there: the hooks had removed the map
		}
		if has != (s.Hooked != nil) || has && !reflect.DeepEqual(cur, hooked) {
			continue // changed since the hooks wrote it
		}
		if s.Original == nil {
			doc.Remove(s.Tokens)
			continue
		}
		if has && doc.IsArrayIndex(s.Tokens) {
			doc.Remove(s.Tokens) // the hooks replaced this element: put it back in its place (Set inserts)
		}
		if _, err := doc.Set(s.Tokens, original); err != nil {
			return ReasonMalformed
		}
	}
	return ""
}

func isEmptyAnnotations(tokens []string, v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0 && len(tokens) == 2 && tokens[0] == "metadata" && tokens[1] == "annotations"
}

// Holds reports whether doc holds the JSON value v at tokens (v nil: nothing there).
func Holds(doc Doc, tokens []string, v []byte) bool {
	cur, has := doc.Lookup(tokens)
	if has != (v != nil) {
		return false
	}
	if !has {
		return true
	}
	want, err := jsondoc.Decode(v)
	return err == nil && reflect.DeepEqual(cur, want)
}
