package engine

import (
	"context"
	"fmt"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/undo"
)

// stripStepEvery is how many removals of one strip path runStripDoc makes between two step
// boundaries (a Wildcard makes one per element).
const stripStepEvery = 256

// runStripDoc is runChain for a chain of strip hooks only (the document path): their paths are
// removed from the request's object as a jsondoc.Doc, one concrete path at a time
// (builtin.ConcretePaths: a Wildcard is linear in its elements) — no decode, no compare: the
// removals are the patch. Each hook's filter is judged on the namespace and labels as they are
// when it runs. done is false, nothing done, for the plan's fallbacks (fallbackScalar,
// fallbackWhole): the typed path runs instead.
func (rn *call) runStripDoc(ctx context.Context, c *chain, rec *intake.Record, records bool) (o outcome, done bool, err error) {
	raw := rec.Raw
	doc := rec.Doc()
	if _, write := c.key.Type.ReadOf(); write { // the reserved annotations are synchook's (undo.DropReserved)
		for _, k := range undo.Reserved {
			doc.Remove([]string{"metadata", "annotations", k})
		}
	}
	namespace, _ := doc.Lookup([]string{"metadata", "namespace"})
	ns, _ := namespace.(string)
	for _, h := range c.hooks {
		if err := stepBoundary(ctx, c); err != nil {
			return outcome{}, true, err
		}
		if h.stripMatches != nil && !h.stripMatches(ns, docLabels(doc)) {
			continue
		}
		for _, path := range h.strip {
			removals := 0
			for tokens := range builtin.ConcretePaths(path, doc.Len) {
				if removals++; removals%stripStepEvery == 0 {
					if err := stepBoundary(ctx, c); err != nil {
						return outcome{}, true, err
					}
				}
				if !doc.Remove(tokens) && !absentIn(doc, tokens) {
					return outcome{}, false, nil // fallbackScalar: the typed decode judges it
				}
			}
		}
	}
	if !doc.Changed() {
		return outcome{hooks: len(c.hooks)}, true, nil
	}
	ops := doc.Ops()
	if records {
		n := len(ops)
		ops, value, sealed, err := rn.record(c, raw, ops, false)
		if err != nil {
			return outcome{}, true, err
		}
		if !sealed {
			return outcome{}, false, nil // fallbackWhole
		}
		if value != "" {
			if err := doc.ApplyOps(ops[n:]); err != nil { // the undo's own operation, on the Doc too
				return outcome{}, true, fmt.Errorf("%s: %w", c.key, err)
			}
		}
	}
	return outcome{ops: doc.Ops(), hooks: len(c.hooks), doc: doc}, true, nil
}

// absentIn reports whether the path tokens is absent from doc the way the typed strip finds
// it absent too: its deepest existing parent is an object, an array or null. A scalar there
// (a "spec" written as a string) is what the typed decode refuses, so the document path leaves
// that judgement to it.
func absentIn(doc *jsondoc.Doc, tokens []string) bool {
	for i := len(tokens) - 1; i >= 0; i-- {
		if k, ok := doc.Kind(tokens[:i]); ok {
			return k == '{' || k == '[' || k == 'n'
		}
	}
	return true
}

// docLabels returns the labels of doc's object as they are now (nil: none).
func docLabels(doc *jsondoc.Doc) map[string]string {
	v, _ := doc.Lookup([]string{"metadata", "labels"})
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, _ := x.(string)
		out[k] = s
	}
	return out
}
