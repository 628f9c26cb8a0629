package undo

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/patch"
)

// A read whose undo is dropped after some of its steps were applied (here: an entry, applied
// last, whose value is not JSON) gives the stored object as it is, not a half-undone one, and
// the read chain's hooks then work on that.
func TestAReadWhoseUndoIsDroppedHalfWayGivesTheStoredObject(t *testing.T) {
	raw := []byte(`{"metadata":{"annotations":{"synchook.io/undo":"v"}},"spec":{"image":"mirror/app","x":1}}`)
	steps, reason := parseSteps([]Entry{{Path: "/spec/image", Hooked: json.RawMessage(`"mirror/app"`), Original: json.RawMessage(`"app"`)}})
	if reason != "" {
		t.Fatal(reason)
	}
	bad := Step{Entry: Entry{Path: "/spec/x", Hooked: json.RawMessage(`{`), Original: json.RawMessage(`0`)}, Tokens: []string{"spec", "x"}}
	p := Plan{Steps: append([]Step{bad}, steps...)} // applied backwards: the image first
	chain := func(view []byte) ([]patch.Operation, error) {
		if string(view) != string(raw) {
			t.Errorf("the read chain's hooks got\n%s\nwant the stored object\n%s", view, raw)
		}
		return []patch.Operation{{Operation: "replace", Path: "/spec/x", Value: 2}}, nil
	}
	reseal := func([]Entry) (string, error) { return "", nil }
	doc, res, err := p.Read(context.Background(), jsondoc.New(raw), raw, reseal, chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonMalformed {
		t.Errorf("reason %q, want %q", res.Reason, ReasonMalformed)
	}
	got, err := doc.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"metadata":{"annotations":{"synchook.io/undo":"v"}},"spec":{"image":"mirror/app","x":2}}`; !same(t, got, []byte(want)) {
		t.Errorf("read gives\n%s\nwant\n%s", got, want)
	}
}

type toldObserver struct{ rejected, skipped []string }

func (o *toldObserver) ObserveUndoRejected(_ hooks.HookType, _ schema.GroupVersionKind, reason string) {
	o.rejected = append(o.rejected, reason)
}

func (o *toldObserver) ObserveUndoSkipped(_ hooks.HookType, _ schema.GroupVersionKind, reason string, n int) {
	o.skipped = append(o.skipped, fmt.Sprintf("%s=%d", reason, n))
}

// What a read made of an undo is told once: a dropped undo as rejected (and nothing of what it
// left out), an applied one by the entries it left out.
func TestTellSaysWhatAReadMadeOfAnUndo(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, c := range []struct {
		res               Result
		rejected, skipped []string
	}{
		{Result{Reason: ReasonUnauthentic, Skipped: map[string]int{SkipChanged: 1}}, []string{ReasonUnauthentic}, nil},
		{Result{Skipped: map[string]int{SkipHeld: 2}}, nil, []string{SkipHeld + "=2"}},
		{Result{}, nil, nil},
	} {
		o := &toldObserver{}
		c.res.Tell(o, hooks.GetPhysical, gvk)
		c.res.Tell(nil, hooks.GetPhysical, gvk) // no observer: nothing to tell
		if !reflect.DeepEqual(o.rejected, c.rejected) || !reflect.DeepEqual(o.skipped, c.skipped) {
			t.Errorf("%+v told rejected %v skipped %v, want %v %v", c.res, o.rejected, o.skipped, c.rejected, c.skipped)
		}
	}
}
