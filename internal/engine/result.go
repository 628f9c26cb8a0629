package engine

import (
	"fmt"
	"reflect"

	"github.com/synchook/synchook/internal/answer"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/patch"
)

// Result is the outcome of one chain run.
type Result struct {
	// Patch is the RFC 6902 JSON Patch (a JSON array) that turns the request object into the
	// hooked object; nil when no hook changed anything or no hook is registered.
	Patch []byte
	// Operations is the number of operations in Patch.
	Operations int
	// Hooks is the number of hooks that ran.
	Hooks int

	raw []byte
	ops []patch.Operation
	// doc is the request's object as the chain edited it, when it kept one (an undo read);
	// goType the Go type of the kind, which answer.Of encodes along.
	doc    *jsondoc.Doc
	goType reflect.Type
	// rec is the request object's record (package intake; nil: none), for the loop detector.
	rec *intake.Record
}

// Answer returns the JSON that answers a vcluster plugin's Mutate: decoded with encoding/json's
// Unmarshal INTO the object the request was decoded from (the way vcluster reads it), and also
// into a new one, it gives exactly the hooked object (package answer). nil when nothing changed.
// It is the request's bytes with the chain's edits: spliced into them where the edits add or
// remove members or replace scalars (answer.SpliceVia, from what the intake read of them), else encoded along the kind's Go type
// (answer.Of). Errors: an edit that does not apply (a bug) or a value that does not encode.
func (r Result) Answer() ([]byte, error) {
	if r.Patch == nil {
		return nil, nil
	}
	if r.doc != nil {
		return answer.Of(r.goType, r.doc)
	}
	return answer.SpliceVia(r.goType, r.raw, r.rec.TopLevel(), r.rec.IndexOf(r.raw), r.ops)
}

// Object returns the request object with Patch applied: the request bytes themselves when
// nothing changed, else those bytes with the chain's edits (computed on each call; the
// admission transport never needs it).
func (r Result) Object() ([]byte, error) {
	if r.Patch == nil {
		return r.raw, nil
	}
	doc, err := r.edited()
	if err != nil {
		return nil, err
	}
	return doc.Bytes()
}

// edited returns the request's object with the chain's edits: the chain's own Doc, else a Doc
// of the request with the operations applied.
func (r Result) edited() (*jsondoc.Doc, error) {
	if r.doc != nil {
		return r.doc, nil
	}
	doc := jsondoc.New(r.raw)
	if err := doc.ApplyOps(r.ops); err != nil {
		return nil, fmt.Errorf("apply the hooks' patch: %w", err)
	}
	return doc, nil
}
