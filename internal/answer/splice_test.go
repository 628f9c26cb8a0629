package answer_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/internal/answer"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

var podType = reflect.TypeFor[corev1.Pod]()

// spliceChanges are the hooks of the Splice tests: each changes the Pod as a typed hook might.
// byHand says Splice splices the change into the request's bytes itself (else through Of);
// a change to a Pod that lacks what it needs may go either way.
var spliceChanges = []struct {
	name   string
	change func(p *corev1.Pod, s string)
	byHand bool
}{
	{"sets spec.nodeSelector's pool", func(p *corev1.Pod, s string) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector["pool"] = s
	}, true},
	{"adds a label", func(p *corev1.Pod, s string) {
		p.Labels = maps.Clone(p.Labels)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["team"] = s
	}, true},
	{"changes the first container's image", func(p *corev1.Pod, s string) {
		if len(p.Spec.Containers) > 0 {
			p.Spec.Containers[0].Image = "registry.example.com/" + s
		}
	}, true},
	{"sets restartPolicy and status.phase", func(p *corev1.Pod, s string) {
		p.Spec.RestartPolicy = corev1.RestartPolicy("P" + s)
		p.Status.Phase = corev1.PodPhase("Q" + s)
	}, true},
	{"sets a new securityContext", func(p *corev1.Pod, _ string) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	}, true},
	{"removes a label", func(p *corev1.Pod, _ string) {
		if keys := slices.Sorted(maps.Keys(p.Labels)); len(keys) > 0 {
			p.Labels = maps.Clone(p.Labels)
			delete(p.Labels, keys[0])
		}
	}, true},
	{"adds a toleration", func(p *corev1.Pod, s string) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: s, Operator: corev1.TolerationOpExists})
	}, false},
	{"clears schedulerName", func(p *corev1.Pod, _ string) { p.Spec.SchedulerName = "" }, false},
	{"empties the first container's args", func(p *corev1.Pod, _ string) {
		if len(p.Spec.Containers) > 0 {
			p.Spec.Containers[0].Args = nil
		}
	}, true},
}

// withUnknownFields returns the JSON object raw with a member no Pod field decodes at the top
// and in spec (when spec is an object), as a newer syncer's object might hold.
func withUnknownFields(tb testing.TB, raw []byte) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatal(err)
	}
	m["xUnknown"] = map[string]any{"kept": true}
	if spec, ok := m["spec"].(map[string]any); ok {
		spec["xUnknownSpec"] = "kept"
	}
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// hookedAndPatch decodes raw as the engine does, runs change on a copy with a sealed undo's
// annotation added (as runTyped seals it), and returns the hooked Pod and the patch from raw
// to it as runTyped makes it (patch.DiffTyped, moved onto raw). ok is false when raw does not
// decode into a Pod.
func hookedAndPatch(tb testing.TB, raw []byte, change func(*corev1.Pod, string), s string) (*corev1.Pod, []patch.Operation, bool) {
	tb.Helper()
	before := &corev1.Pod{}
	if kjson.UnmarshalCaseSensitivePreserveInts(raw, before) != nil {
		return nil, nil, false
	}
	out := before.DeepCopy()
	change(out, s)
	ann := maps.Clone(out.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[undo.Annotation] = "v1.sealed." + strings.Repeat("x", 300) + s
	out.Annotations = ann
	ops, err := patch.DiffTyped(before, out)
	if err != nil {
		tb.Fatal(err)
	}
	if ops, err = patch.RebaseVia(raw, nil, ops); err != nil {
		tb.Fatal(err)
	}
	return out, ops, true
}

// checkAnswers checks that Splice's answer and today's one (json.Marshal of the hooked Pod)
// each give the hooked Pod, decoded fresh and decoded into the Pod that raw encodes (as vcluster
// decodes it), and that Splice's answer keeps raw's unknown members.
func checkAnswers(t *testing.T, raw []byte, hooked *corev1.Pod, ops []patch.Operation) {
	t.Helper()
	spliced, err := answer.Splice(podType, raw, nil, ops)
	if err != nil {
		t.Fatalf("Splice: %v", err)
	}
	// given raw's top-level members (as the engine's intake gives them), or members of a copy
	// of raw (which it must not take for raw's: here their offsets from the end of their
	// array's capacity, which is all Splice can read of them, are raw's shifted), Splice
	// answers the same bytes
	spare := append(make([]byte, 0, len(raw)+1), raw...)
	top, _ := jsonscan.Members(spare)
	elsewhere, _ := jsonscan.Members(slices.Clip(slices.Clone(raw)))
	for name, top := range map[string][]jsonscan.Member{"raw's": top, "a copy's": elsewhere} {
		if a, err := answer.Splice(podType, spare, top, ops); err != nil || string(a) != string(spliced) {
			t.Fatalf("Splice given %s top-level members: %s, %v; want %s", name, a, err, spliced)
		}
	}
	checkSpliceVia(t, raw, ops, true)
	today := []byte(nil) // runTyped's answer before Splice: the hooked Pod's encoding where
	if mergeSafe(ops) {  // mergeSafe, else Result.Answer's Of on the request's Doc
		if today, err = json.Marshal(hooked); err != nil {
			t.Fatal(err)
		}
	} else {
		doc := jsondoc.New(raw)
		if err := doc.ApplyOps(ops); err != nil {
			t.Fatal(err)
		}
		if today, err = answer.Of(podType, doc); err != nil {
			t.Fatal(err)
		}
	}
	// the hooked Pod as JSON can carry it (invalid UTF-8 in a hook's string becomes U+FFFD)
	want := decodeFresh(t, []byte(encode(t, hooked)))
	for name, a := range map[string][]byte{"Splice": spliced, "today's answer": today} {
		if got := decodeFresh(t, a); got != want {
			t.Fatalf("%s's answer decoded fresh gives\n%s\nwant\n%s\nanswer %s", name, got, want, a)
		}
		into := &corev1.Pod{}
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(a, into); err != nil {
			t.Fatalf("%s's answer %s does not decode: %v", name, a, err)
		}
		if got := encode(t, into); got != want {
			t.Fatalf("%s's answer decoded into the request's Pod gives\n%s\nwant\n%s\nanswer %s", name, got, want, a)
		}
	}
	var m, in map[string]any
	if err := json.Unmarshal(spliced, &m); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["xUnknown"]; !ok {
		t.Fatalf("Splice lost the unknown member xUnknown: %s", spliced)
	}
	if spec, ok := in["spec"].(map[string]any); ok && spec["xUnknownSpec"] != nil {
		if spec, _ := m["spec"].(map[string]any); spec["xUnknownSpec"] == nil {
			t.Fatalf("Splice lost the unknown member spec.xUnknownSpec: %s", spliced)
		}
	}
}

// mergeSafe is the engine's rule (internal/engine's mergeSafe) for when runTyped answered with
// the hooked object's encoding: every operation adds a member to an object or replaces a scalar.
func mergeSafe(ops []patch.Operation) bool {
	for _, op := range ops {
		switch op.Operation {
		case "add":
			last := op.Path[strings.LastIndexByte(op.Path, '/')+1:]
			if last == "-" || strings.Trim(last, "0123456789") == "" {
				return false
			}
		case "replace":
			switch v := op.Value.(type) {
			case string, bool, float64, int64, nil:
			case json.RawMessage:
				if len(v) == 0 || v[0] == '{' || v[0] == '[' {
					return false
				}
			default:
				return false
			}
		default:
			return false
		}
	}
	return true
}

func TestSpliceGivesTheHookedObjectAndKeepsUnknownFields(t *testing.T) {
	pods := map[string][]byte{
		"the benchmark Pod":     fixtures.JSON(fixtures.Pod("ns", "web")),
		"a Pod with every kind": fixtures.JSON(examplePod()),
		"a Pod with no spec":    []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`),
	}
	for podName, pod := range pods {
		raw := withUnknownFields(t, pod)
		for _, c := range spliceChanges {
			t.Run(podName+" whose hook "+c.name+" gets the same object both ways", func(t *testing.T) {
				hooked, ops, ok := hookedAndPatch(t, raw, c.change, "tenants")
				if !ok {
					t.Fatal("the Pod does not decode")
				}
				checkAnswers(t, raw, hooked, ops)
				if podName == "the benchmark Pod" {
					if got := answer.SplicedByHand(podType, raw, ops); got != c.byHand {
						t.Errorf("spliced by hand: %v, want %v (ops %v)", got, c.byHand, ops)
					}
				}
			})
		}
	}
}

func TestSpliceAnswersAsOfDoesForAnyPatch(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{},"annotations":{"x":"y"}},` +
		`"spec":{"nodeSelector":{"a":"b"},"nodeName":"n","containers":[{"name":"c","image":"i"}],"xUnknown":1}}`)
	for _, tc := range []struct {
		name string
		ops  []patch.Operation
	}{
		{"an add over a map that is there", []patch.Operation{{Operation: "add", Path: "/spec/nodeSelector", Value: json.RawMessage(`{"pool":"p"}`)}}},
		{"two adds into an empty map", []patch.Operation{
			{Operation: "add", Path: "/metadata/labels/a", Value: "1"},
			{Operation: "add", Path: "/metadata/labels/b~1c", Value: "2"},
		}},
		{"adds into two maps and a new member", []patch.Operation{
			{Operation: "add", Path: "/metadata/annotations/synchook.io~1undo", Value: "sealed"},
			{Operation: "add", Path: "/metadata/labels/a", Value: "1"},
			{Operation: "add", Path: "/spec/hostname", Value: "h"},
		}},
		{"a replace of a map by another", []patch.Operation{{Operation: "replace", Path: "/spec/nodeSelector", Value: json.RawMessage(`{"pool":"p"}`)}}},
		{"two replaces of one value", []patch.Operation{
			{Operation: "replace", Path: "/spec/nodeName", Value: "m"},
			{Operation: "replace", Path: "/spec/nodeName", Value: "o"},
		}},
		{"two adds of one member", []patch.Operation{
			{Operation: "add", Path: "/metadata/labels/a", Value: "1"},
			{Operation: "add", Path: "/metadata/labels/a", Value: "2"},
		}},
		{"a replace of a scalar by null", []patch.Operation{{Operation: "replace", Path: "/spec/nodeName", Value: nil}}},
		{"an add of null over a scalar", []patch.Operation{{Operation: "add", Path: "/spec/nodeName", Value: json.RawMessage(`null`)}}},
		{"a replace in an array's element", []patch.Operation{{Operation: "replace", Path: "/spec/containers/0/image", Value: "j"}}},
		{"an add in an array's element", []patch.Operation{{Operation: "add", Path: "/spec/containers/0/workingDir", Value: "/w"}}},
		{"a replace of an array element", []patch.Operation{{Operation: "replace", Path: "/spec/containers/0", Value: json.RawMessage(`{"name":"d"}`)}}},
		{"an add and a change inside what it added", []patch.Operation{
			{Operation: "add", Path: "/spec/affinity", Value: json.RawMessage(`{}`)},
			{Operation: "add", Path: "/spec/affinity/nodeAffinity", Value: json.RawMessage(`{}`)},
		}},
		{"a removal", []patch.Operation{{Operation: "remove", Path: "/spec/nodeName"}}},
		{"a map's key removed", []patch.Operation{{Operation: "remove", Path: "/metadata/annotations/x"}}},
		{"a map's key removed and others set", []patch.Operation{
			{Operation: "remove", Path: "/spec/nodeSelector/a"},
			{Operation: "add", Path: "/spec/nodeSelector/b", Value: "2"},
			{Operation: "add", Path: "/metadata/labels/c", Value: "3"},
		}},
		{"a key removed and added again", []patch.Operation{
			{Operation: "remove", Path: "/metadata/annotations/x"},
			{Operation: "add", Path: "/metadata/annotations/x", Value: "z"},
		}},
		{"a map removed", []patch.Operation{{Operation: "remove", Path: "/spec/nodeSelector"}}},
		{"an array removed", []patch.Operation{{Operation: "remove", Path: "/spec/containers"}}},
		{"a member added and removed again", []patch.Operation{ // a write's undo restored, taken off again
			{Operation: "add", Path: "/spec/affinity", Value: json.RawMessage(`{"nodeAffinity":{}}`)},
			{Operation: "remove", Path: "/spec/affinity"},
		}},
		{"the whole document replaced", []patch.Operation{{Operation: "replace", Path: "", Value: json.RawMessage(`{"kind":"Pod","spec":{"xUnknown":2}}`)}}},
	} {
		t.Run(tc.name+" gets Of's object", func(t *testing.T) {
			got := spliceAsOf(t, raw, tc.ops)
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil || m["spec"].(map[string]any)["xUnknown"] == nil {
				t.Errorf("spec.xUnknown lost: %s", got)
			}
		})
	}
}

// TestSpliceFindsKeysAsOfDoes: a key the request holds twice, or writes with escapes or
// non-ASCII text, is the member Of's Doc finds (encoding/json's), so Splice answers as Of does.
func TestSpliceFindsKeysAsOfDoes(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		ops       []patch.Operation
	}{
		{
			"a label added to a metadata with its labels twice", `{"metadata":{"labels":{"a":"1"},"name":"x","labels":{"b":"2"}}}`,
			[]patch.Operation{{Operation: "add", Path: "/metadata/labels/c", Value: "3"}},
		},
		{
			"a label added under metadata twice", `{"metadata":{"name":"x"},"kind":"Pod","metadata":{"labels":{}}}`,
			[]patch.Operation{{Operation: "add", Path: "/metadata/labels/a", Value: "1"}},
		},
		{
			"a label key that is there twice removed", `{"metadata":{"labels":{"a":"1","b":"2","a":"3"}}}`,
			[]patch.Operation{{Operation: "remove", Path: "/metadata/labels/a"}},
		},
		{
			"a scalar that is there twice replaced", `{"spec":{"nodeName":"a","hostname":"h","nodeName":"b"}}`,
			[]patch.Operation{{Operation: "replace", Path: "/spec/nodeName", Value: "c"}},
		},
		{
			"a label written with an escape removed", `{"metadata":{"labels":{"\u0061pp":"x","b":"y"}}}`,
			[]patch.Operation{{Operation: "remove", Path: "/metadata/labels/app"}},
		},
		{
			"a label with a slash written escaped removed", `{"metadata":{"labels":{"a\/b":"x","c":"y"}}}`,
			[]patch.Operation{{Operation: "remove", Path: "/metadata/labels/a~1b"}},
		},
		{
			"a non-ASCII label removed", `{"metadata":{"labels":{"é":"x","c":"y"}}}`,
			[]patch.Operation{{Operation: "remove", Path: "/metadata/labels/é"}},
		},
		{
			"a label with a longer and a shorter neighbour removed", `{"metadata":{"labels":{"appx":"1","app":"2","ap":"3"}}}`,
			[]patch.Operation{{Operation: "remove", Path: "/metadata/labels/app"}},
		},
		{
			"a field written with an escape replaced", `{"spec":{"node\u004eame":"a","hostname":"h"}}`,
			[]patch.Operation{{Operation: "replace", Path: "/spec/nodeName", Value: "b"}},
		},
		{
			"a map written under an escaped key set whole", `{"spec":{"node\u0053elector":{"a":"b"}}}`,
			[]patch.Operation{{Operation: "add", Path: "/spec/nodeSelector", Value: json.RawMessage(`{"pool":"p"}`)}},
		},
		{
			"a label written with an escape set, another removed", `{"metadata":{"labels":{"te\u0061m":"x","b":"y"}}}`,
			[]patch.Operation{{Operation: "add", Path: "/metadata/labels/team", Value: "z"}, {Operation: "remove", Path: "/metadata/labels/b"}},
		},
	} {
		t.Run(tc.name+" gets Of's object", func(t *testing.T) {
			spliceAsOf(t, []byte(tc.raw), tc.ops)
		})
	}
}

// spliceAsOf returns Splice's answer to ops on raw after checking it against Of's on raw's Doc
// with ops applied: valid JSON that gives the same Pod decoded fresh and decoded into raw's.
func spliceAsOf(t *testing.T, raw []byte, ops []patch.Operation) []byte {
	t.Helper()
	doc := jsondoc.New(raw)
	if err := doc.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	want, err := answer.Of(podType, doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := answer.Splice(podType, raw, nil, ops)
	if err != nil {
		t.Fatalf("Splice: %v", err)
	}
	if !json.Valid(got) {
		t.Fatalf("Splice's answer is not JSON: %s", got)
	}
	if g, w := decodeFresh(t, got), decodeFresh(t, want); g != w {
		t.Errorf("decoded fresh:\n%s\nwant\n%s\nanswer %s", g, w, got)
	}
	if g, w := decodeInto(t, raw, got), decodeInto(t, raw, want); g != w {
		t.Errorf("decoded into the request's Pod:\n%s\nwant\n%s\nanswer %s", g, w, got)
	}
	return got
}

// decodeInto decodes request and then a into one Pod, as vcluster reads an answer, and returns
// its encoding.
func decodeInto(t *testing.T, request, a []byte) string {
	t.Helper()
	p := &corev1.Pod{}
	if err := json.Unmarshal(request, p); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(a, p); err != nil {
		t.Fatalf("answer %s does not decode: %v", a, err)
	}
	return encode(t, p)
}

func TestSpliceRefusesAPatchThatDoesNotApply(t *testing.T) {
	raw := []byte(`{"metadata":{"name":"a","labels":{"x":"y"}},"spec":{"containers":[]}}`)
	for _, tc := range []struct {
		name string
		ops  []patch.Operation
	}{
		{"a replace of a missing member", []patch.Operation{{Operation: "replace", Path: "/spec/nodeName", Value: "n"}}},
		{"an add under a missing parent", []patch.Operation{{Operation: "add", Path: "/spec/nodeSelector/pool", Value: "p"}}},
		{"a move", []patch.Operation{{Operation: "move", Path: "/metadata/generateName"}}},
	} {
		t.Run(tc.name+" is an error", func(t *testing.T) {
			if out, err := answer.Splice(podType, raw, nil, tc.ops); err == nil {
				t.Errorf("no error; answer %s", out)
			}
		})
	}
}

func TestSpliceWithNoOperationsIsTheRequest(t *testing.T) {
	raw := []byte(`{"metadata":{"name":"a"}}`)
	out, err := answer.Splice(podType, raw, nil, nil)
	if err != nil || string(out) != string(raw) {
		t.Fatalf("Splice(no ops) = %s, %v; want the request", out, err)
	}
}

// FuzzSplice decodes a Pod from the fuzzer's JSON (with unknown members added), runs one of
// spliceChanges on it and seals an undo annotation, as runTyped does, and checks that Splice's
// answer and json.Marshal of the hooked Pod (runTyped's answer before Splice) each give the
// hooked Pod decoded fresh and into the request's Pod, and that Splice keeps the unknown members.
func FuzzSplice(f *testing.F) {
	for i := range spliceChanges {
		f.Add(fixtures.JSON(fixtures.Pod("ns", "web")), uint8(i), "tenants")
		f.Add(fixtures.JSON(examplePod()), uint8(i), `a"\u00e9<&>`)
	}
	f.Add([]byte(`{"metadata":{"annotations":null,"labels":{}},"spec":{"nodeSelector":null}}`), uint8(0), "p")
	f.Add([]byte(`{}`), uint8(1), "\xff") // a hook's invalid UTF-8: every answer carries U+FFFD
	f.Add([]byte(`{"metadata":{"labels":{"team":"x"}},"spec":{"nodeSelector":{"pool":"a"},"restartPolicy":"Always"}}`), uint8(1), "b")
	f.Fuzz(func(t *testing.T, pod []byte, which uint8, s string) {
		held := &corev1.Pod{}
		if json.Unmarshal(pod, held) != nil {
			t.Skip()
		}
		request, err := json.Marshal(held) // what vcluster sends
		if err != nil {
			t.Skip()
		}
		raw := withUnknownFields(t, request)
		hooked, ops, ok := hookedAndPatch(t, raw, spliceChanges[int(which)%len(spliceChanges)].change, s)
		if !ok {
			t.Skip()
		}
		checkAnswers(t, raw, hooked, ops)
	})
}

// BenchmarkTypedAnswer is the answer of a typed write on the ~5 KiB benchmark Pod whose hook
// sets spec.nodeSelector's pool, with its sealed undo: json.Marshal of the hooked Pod (what
// runTyped encodes today), Splice into the request's bytes (without and with the top-level
// members), and Of on the request's Doc with the patch applied (Result.Answer's way when
// there is no merge answer).
func BenchmarkTypedAnswer(b *testing.B) {
	raw := fixtures.JSON(fixtures.Pod("ns", "web"))
	hooked, ops, ok := hookedAndPatch(b, raw, spliceChanges[0].change, "tenants")
	if !ok {
		b.Fatal("the Pod does not decode")
	}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(hooked); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Splice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := answer.Splice(podType, raw, nil, ops); err != nil {
				b.Fatal(err)
			}
		}
	})
	top, _ := jsonscan.Members(raw)
	b.Run("Splice given top", func(b *testing.B) { // as the engine calls it: its intake read the top level
		b.ReportAllocs()
		for b.Loop() {
			if _, err := answer.Splice(podType, raw, top, ops); err != nil {
				b.Fatal(err)
			}
		}
	})
	// the undo's walk of the nodeSelector's object and the answer, on the index the engine's
	// intake made (top-level members): before SpliceVia, the walk (jsonscan.Find) and Splice's
	// scan of metadata and spec; now the walk kept in the index (Member) and the annotations
	// held from the intake, which SpliceVia reads instead of scanning
	meta, _, _ := jsonscan.Find(raw, "metadata")
	annotations, _, _ := jsonscan.Find(meta.Value, "annotations")
	spec, _, _ := jsonscan.Find(raw, "spec")
	b.Run("walk+Splice given top", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonscan.NewIndexOf(raw, top)
			jsonscan.Find(spec.Value, "nodeSelector")
			if _, err := answer.Splice(podType, raw, top, ops); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("walk+SpliceVia the index", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x := jsonscan.NewIndexOf(raw, top)
			x.Hold("/metadata/annotations", annotations.Value)
			x.Member("/spec", "nodeSelector", true)
			if _, err := answer.SpliceVia(podType, raw, top, x, ops); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Doc+Of", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			doc := jsondoc.New(raw)
			if err := doc.ApplyOps(ops); err != nil {
				b.Fatal(err)
			}
			if _, err := answer.Of(podType, doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// indexStates returns indexes of raw in the states the engine may hand SpliceVia one: none;
// fresh (nothing split); with raw's top level read (jsonscan.NewIndexOf, as the intake's
// record makes it) and, when unique says each key of raw is there once (the intake refuses a
// repeated one), metadata's annotations held (as the record holds them); with each operation's
// member of its parent asked for (as undo.EntriesOf asks for an add's) on top of that; and
// with every parent of an operation split (as a lookup under it splits it).
func indexStates(raw []byte, ops []patch.Operation, unique bool) map[string]*jsonscan.Index {
	top, _ := jsonscan.Members(raw)
	intake := func() *jsonscan.Index {
		x := jsonscan.NewIndexOf(raw, top)
		if m, _, ok := jsonscan.Find(raw, "metadata"); ok && unique {
			if a, _, ok := jsonscan.Find(m.Value, "annotations"); ok {
				x.Hold("/metadata/annotations", a.Value)
			}
		}
		return x
	}
	probed, split := intake(), intake()
	for _, op := range ops {
		cut := strings.LastIndexByte(op.Path, '/')
		if cut < 0 {
			continue
		}
		if key, ok := jsonscan.UnescapeToken(op.Path[cut+1:]); ok {
			probed.Member(op.Path[:cut], key, true)
		}
		split.Lookup(op.Path[:cut] + "/x")
	}
	return map[string]*jsonscan.Index{"no index": nil, "a fresh index": jsonscan.NewIndex(raw), "the intake's index": intake(), "the index with the members asked for": probed, "the index with the parents split": split}
}

// checkSpliceVia checks that SpliceVia, given raw's index in any state (indexStates), answers
// what Splice answers without one, byte for byte, or fails as it does.
func checkSpliceVia(t *testing.T, raw []byte, ops []patch.Operation, unique bool) {
	t.Helper()
	want, wantErr := answer.Splice(podType, raw, nil, ops)
	top, _ := jsonscan.Members(raw)
	for name, x := range indexStates(raw, ops, unique) {
		got, err := answer.SpliceVia(podType, raw, top, x, slices.Clone(ops))
		if (err != nil) != (wantErr != nil) || string(got) != string(want) {
			t.Fatalf("SpliceVia given %s: %s, %v; Splice without one: %s, %v (ops %v)", name, got, err, want, wantErr, ops)
		}
	}
}

func TestSpliceViaAnswersAsSpliceOnTenantInput(t *testing.T) {
	add := func(path string, v any) patch.Operation {
		return patch.Operation{Operation: "add", Path: path, Value: v}
	}
	replace := func(path string, v any) patch.Operation {
		return patch.Operation{Operation: "replace", Path: path, Value: v}
	}
	remove := func(path string) patch.Operation { return patch.Operation{Operation: "remove", Path: path} }
	undoAdd := add("/metadata/annotations/synchook.io~1undo", "v1.sealed.x")
	for _, c := range []struct {
		name   string
		raw    string
		unique bool // each key once (what the intake lets through)
		ops    []patch.Operation
	}{
		{"a nodeSelector and the undo added to the benchmark Pod", string(fixtures.JSON(fixtures.Pod("ns", "web"))), true, []patch.Operation{add("/spec/nodeSelector", map[string]string{"pool": "a"}), undoAdd}},
		{"a member added to an empty spec and empty annotations", `{"metadata":{"annotations":{}},"spec":{}}`, true, []patch.Operation{add("/spec/nodeSelector", map[string]string{"pool": "a"}), undoAdd}},
		{"the undo added where annotations are null", `{"metadata":{"annotations":null},"spec":{}}`, true, []patch.Operation{add("/metadata/annotations", map[string]string{"synchook.io/undo": "x"})}},
		{"members added under keys written with escapes", `{"metadata":{"annotations":{"a\/b":"1"}},"sp\u0065c":{"node\u0053elector":{"pool":"b"}}}`, true, []patch.Operation{replace("/spec/nodeSelector/pool", "c"), add("/metadata/annotations/a~1b", "2"), undoAdd}},
		{"a member added whose key has a slash and a tilde", `{"metadata":{"annotations":{"x":"1"}},"spec":{}}`, true, []patch.Operation{add("/metadata/annotations/a~1b~0c", "2")}},
		{"a member added to an object whose key repeats", `{"metadata":{"annotations":{"x":"1"}},"spec":{"a":1},"spec":{"b":2}}`, false, []patch.Operation{add("/spec/nodeSelector", map[string]string{"pool": "a"})}},
		{"a member added where it repeats", `{"metadata":{"annotations":{"x":"1","x":"2"}},"spec":{}}`, false, []patch.Operation{add("/metadata/annotations/x", "3")}},
		{"two members added to one object", `{"metadata":{"annotations":{"x":"1"}},"spec":{"a":1}}`, true, []patch.Operation{add("/spec/nodeSelector", map[string]string{"pool": "a"}), add("/spec/schedulerName", "s"), undoAdd}},
		{"a scalar replaced and a map key removed", `{"metadata":{"labels":{"a":"1","b":"2"},"annotations":{"x":"1"}},"spec":{"restartPolicy":"Always"}}`, true, []patch.Operation{replace("/spec/restartPolicy", "Never"), remove("/metadata/labels/a"), undoAdd}},
		{"a member added to an array's object", `{"spec":{"containers":[{"name":"a"}]}}`, true, []patch.Operation{add("/spec/containers/0/image", "i")}},
		{"a member added to what is no object", `{"spec":[1],"metadata":{"annotations":"x"}}`, true, []patch.Operation{add("/spec/nodeSelector", "x"), undoAdd}},
		{"a member added under what is absent", `{"metadata":{}}`, true, []patch.Operation{add("/spec/nodeSelector", map[string]string{"pool": "a"})}},
		{"white space around every value", " { \"metadata\" : { \"annotations\" : { } } , \"spec\" : { \"a\" : 1 } } ", true, []patch.Operation{add("/spec/nodeSelector", map[string]string{"pool": "a"}), undoAdd}},
		{"an empty object at the top", `{}`, true, []patch.Operation{add("/spec", map[string]any{})}},
	} {
		t.Run(c.name+" gives Splice's answer byte for byte", func(t *testing.T) {
			checkSpliceVia(t, []byte(c.raw), c.ops, c.unique)
		})
	}
}
