package engine

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/intake"
)

// path is the way one chain runs on one object (plan.path).
type path uint8

// The paths, in the order planOf tries them.
const (
	pathTyped        path = iota // one decode into the scheme's type, the hooks, one compare
	pathUnstructured             // a kind the scheme does not know: Unstructured, encodings diffed
	pathMetadata                 // MetadataHooks on the labels and annotations alone (metadata.go)
	pathDocument                 // strip hooks on the request's JSON (stripdoc.go)
)

var pathNames = [...]string{"typed", "unstructured", "metadata", "document"}

// Why each path is taken (plan.why), and the facts a run may show on the way (Plan.Fallbacks).
const (
	whyTyped        = "a hook needs the whole object: one decode into the kind's Go type, the hooks in order, one compare"
	whyUnstructured = "the scheme does not know the kind: decoded as Unstructured, its encodings before and after diffed"
	whyMetadata     = "every hook is a MetadataHook: they run on the labels and annotations alone, no decode"
	whyDocument     = "every hook is a strip hook: their paths are removed from the request's JSON, no decode"
	whyProvenance   = "provenance is marked: each hook's own change is encoded, which needs the decoded object"
	whyRepeats      = "the object repeats a member the label/annotation path reads: the decode says which counts"
	whyNotOwn       = "the object is not the request's own (a view or a restored object) or has no metadata object: the document path reads only the request's record"
	fallbackScalar  = "a strip path meets a scalar where it goes on (the decode judges it): typed"
	fallbackWhole   = "the undo of a removal needs the whole hooked object (metadata.annotations removed whole): typed"
	fallbackLight   = "while the chain's runs change only labels and annotations, the compare is of the two maps; a run that changes more compares the whole object"
	stepRestore     = "before: when metadata carries an undo synchook sealed (it opens under the one rule), the hooks run on the object with it applied and record only their new change (undo.Rule.Rewrite)"
	stepReserved    = "before: the reserved annotations (the undo, provenance) are taken off what the hooks see"
	stepRecord      = "after: the change's undo is recorded and sealed into the undo annotation (undo.RecordOps/RecordMaps, Rule.Seal)"
	stepOpen        = "before: the undo annotation is opened under the one rule (undo.Rule.PlanRead) and applied, on the labels and annotations alone when that is all it touches and the hooks are MetadataHooks (undo.Plan.ViewMaps), else on the object's JSON (undo.Plan.Read); an undo that does not open is dropped and counted"
)

// plan is what runChain does with one object, chosen from the chain's capabilities and the
// object's record before any hook runs.
type plan struct {
	path path
	why  string
	rec  *intake.Record
	// records: the chain records an undo; restore: the object may bring synchook's own undo
	// (runRestored).
	records, restore bool
}

// planOf chooses the plan of the chain c on raw. An error is raw's syntax error where the
// chosen path reads raw itself (the typed decode names its own).
func (rn *call) planOf(c *chain, raw []byte) (plan, error) {
	p := plan{path: pathTyped, why: whyTyped, rec: rn.recordOf(raw), records: rn.reg.recordsUndo(c)}
	if c.unstructured {
		p.path, p.why = pathUnstructured, whyUnstructured
	}
	_, write := c.key.Type.ReadOf()
	p.restore = write && rn.reg.opts.Undo && !rn.keepOwnUndo && p.rec.MayCarryUndo()
	meta, strip := c.metadataOnly(), c.stripOnly()
	if !meta && !strip {
		return p, nil
	}
	if rn.reg.marksProvenance(c) {
		p.why = whyProvenance
		return p, nil
	}
	if err := p.rec.CheckJSON(c.key.GVK, rn.validJSON); err != nil { // the two read raw themselves
		return p, err
	}
	switch own := p.rec.Own() && p.rec.Metadata != nil && p.rec.Metadata[0] == '{'; {
	case meta && !p.rec.Facts().Repeats:
		p.path, p.why = pathMetadata, whyMetadata
	case strip && own:
		p.path, p.why = pathDocument, whyDocument
	case meta:
		p.why = whyRepeats
	default:
		p.why = whyNotOwn
	}
	return p, nil
}

// runChain is runOps for a chain without an undo to apply first: its plan (planOf), then the
// path the plan chose, and the plan's fallback where the run shows the fact it waits for.
func (rn *call) runChain(ctx context.Context, c *chain, raw []byte) (outcome, error) {
	p, err := rn.planOf(c, raw)
	if err != nil {
		return outcome{}, err
	}
	if p.restore {
		if o, own, err := rn.runRestored(ctx, c, raw); own {
			return o, err
		}
	}
	switch p.path {
	case pathMetadata:
		ops, err := c.runMetadata(ctx, rn, p.rec, p.records)
		return outcome{ops: ops, hooks: len(c.hooks)}, err
	case pathDocument:
		if o, done, err := rn.runStripDoc(ctx, c, p.rec, p.records); done {
			return o, err
		} // fallbackScalar, fallbackWhole: the typed path
	}
	o, err := runTyped(ctx, rn, c, raw, p.records)
	if err != nil || len(o.ops) == 0 {
		return outcome{ops: o.ops, hooks: o.hooks}, err
	}
	if p.records && !o.sealed {
		if err := stepBoundary(ctx, c); err != nil {
			return outcome{}, err
		}
		o.ops, _, _, err = rn.record(c, raw, o.ops, true)
	}
	return o, err
}

// Plan is what Runner.Mutate does with one request, chosen before any hook runs from the
// chain's capabilities and the request's record: a value to print (String), for `synchook
// mutate --explain`.
type Plan struct {
	// Key is the chain's kind and hook type.
	Key Key
	// Path is how the chain runs: "none" (no chain), "metadata", "document", "typed",
	// "unstructured", or "list" (Items is the plan of the first item); Why says why.
	Path, Why string
	// Hooks are the chain's hooks, in the order they run.
	Hooks []string
	// Undo are undo's steps, in order: before the hooks, after them.
	Undo []string
	// Fallbacks name each fact that shows only during the run and what the run does then.
	Fallbacks []string
	// Limits are the concurrency slot and deadlines that apply.
	Limits []string
	// Items is the plan of a list's first item (Path "list"); nil otherwise.
	Items *Plan
}

// String renders p as indented lines: the kind and hook type, then each part of the plan.
func (p Plan) String() string {
	var b strings.Builder
	p.write(&b, "")
	return b.String()
}

func (p Plan) write(b *strings.Builder, indent string) {
	fmt.Fprintf(b, "%s%s %s: path %s\n%s  why: %s\n", indent, p.Key.Type, p.Key.GVK.Kind, p.Path, indent, p.Why)
	if len(p.Hooks) > 0 {
		fmt.Fprintf(b, "%s  hooks: %s\n", indent, strings.Join(p.Hooks, ", "))
	}
	for _, part := range []struct {
		name  string
		lines []string
	}{{"undo", p.Undo}, {"fallback", p.Fallbacks}, {"limit", p.Limits}} {
		for _, l := range part.lines {
			fmt.Fprintf(b, "%s  %s: %s\n", indent, part.name, l)
		}
	}
	if p.Items != nil {
		fmt.Fprintf(b, "%s  each item:\n", indent)
		p.Items.write(b, indent+"    ")
	}
}

// Explain returns the plan of a request of Mutate for (gvk, t) on raw, without running any
// hook: raw is checked as Mutate checks it (the same *DecodeError).
func (r *Registry) Explain(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (Plan, error) {
	return NewRunner(r, RunnerOptions{}).Explain(gvk, t, raw)
}

// Explain is Registry.Explain with r's limits.
func (r *Runner) Explain(gvk schema.GroupVersionKind, t hooks.HookType, raw []byte) (Plan, error) {
	rn := r.newCall(false)
	rec, err := r.reg.checkInput(gvk, t, raw, false, &rn.own)
	if err != nil {
		return Plan{}, err
	}
	rn.rec = rec
	key := Key{GVK: gvk, Type: t}
	if c := r.reg.listChain(gvk, t); c != nil {
		p := Plan{Key: key, Path: "list", Why: "a list of a hooked kind is one request: every item runs the item chain, one patch under /items/N"}
		items, err := intake.ListItems(raw, false)
		if err != nil {
			return Plan{}, &failure.DecodeError{GVK: gvk, Err: err}
		}
		if len(items) > 0 {
			item, err := rn.explain(c, items[0])
			if err != nil {
				return Plan{}, err
			}
			p.Items = &item
		}
		p.Limits = r.limits(c)
		return p, nil
	}
	c := r.reg.chains[key]
	if c == nil {
		return Plan{Key: key, Path: "none", Why: "no hook is registered for this kind and hook type: the object passes unchanged"}, nil
	}
	p, err := rn.explain(c, raw)
	p.Limits = r.limits(c)
	return p, err
}

// explain is the Plan of the chain c on raw (planOf, with its reasons).
func (rn *call) explain(c *chain, raw []byte) (Plan, error) {
	out := Plan{Key: c.key}
	for _, h := range c.hooks {
		out.Hooks = append(out.Hooks, h.name)
	}
	if c.undoRead {
		if _, had := rn.undoAnnotationOf(raw); had {
			out.Undo = append(out.Undo, stepOpen)
		}
		if len(c.hooks) == 0 {
			out.Path, out.Why = "undo read", "a read of a kind whose writes record an undo: no hooks of its own"
			return out, nil
		}
	}
	p, err := rn.planOf(c, raw)
	if err != nil {
		return Plan{}, err
	}
	out.Path, out.Why = pathNames[p.path], p.why
	if _, write := c.key.Type.ReadOf(); write {
		if p.restore {
			out.Undo = append(out.Undo, stepRestore)
		}
		out.Undo = append(out.Undo, stepReserved)
	}
	if p.records {
		out.Undo = append(out.Undo, stepRecord)
	}
	switch p.path {
	case pathDocument:
		out.Fallbacks = append(out.Fallbacks, fallbackScalar)
		if p.records {
			out.Fallbacks = append(out.Fallbacks, fallbackWhole)
		}
	case pathTyped:
		out.Fallbacks = append(out.Fallbacks, fallbackLight)
	}
	return out, nil
}

// limits are the concurrency slot and deadlines that apply to a request of chain c.
func (r *Runner) limits(c *chain) []string {
	l := []string{"the request's deadline bounds the whole run: an answer not ready by then is not given"}
	if r.slots != nil {
		l = append(l, "one concurrency slot (RunnerOptions.MaxConcurrent) from the decode to the answer")
	}
	if c.inline() {
		return append(l, "builtin hooks: they run on the request's goroutine, without a deadline of their own")
	}
	if r.hookTimeout > 0 {
		l = append(l, fmt.Sprintf("each hook's own deadline: %s (RunnerOptions.HookTimeout)", r.hookTimeout))
	}
	return l
}
