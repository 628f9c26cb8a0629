package patch_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/patch"
)

// checkDiff asserts that applying Diff(a, b) to a gives a document equal to b.
func checkDiff(t *testing.T, a, b []byte) []patch.Operation {
	t.Helper()
	ops, err := patch.Diff(a, b)
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	pj, err := patch.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	got, err := patch.Apply(a, pj)
	if err != nil {
		t.Fatalf("apply %s to %s: %v", pj, a, err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("Diff(%s, %s) = %s gives %s", a, b, pj, got)
	}
	return ops
}

func TestDiff(t *testing.T) {
	cases := []struct {
		name, a, b string
		ops        int
	}{
		{"equal documents give no operations", `{"a":1}`, `{"a":1}`, 0},
		{"an added label is one add", `{"metadata":{"labels":{"a":"1"}}}`, `{"metadata":{"labels":{"a":"1","b/c~d":"2"}}}`, 1},
		{"a removed member is one remove", `{"a":1,"b":{"c":2}}`, `{"a":1}`, 1},
		{"a changed scalar is one replace", `{"a":1,"b":"x"}`, `{"a":1,"b":"y"}`, 1},
		{"keys in another order are matched by name", `{"a":1,"b":2,"c":3}`, `{"c":3,"b":5,"a":1}`, 1},
		{"an appended element is one add", `{"l":[1,2]}`, `{"l":[1,2,3]}`, 1},
		{"truncated elements are removed from the end", `{"l":[1,2,3,4]}`, `{"l":[1,2]}`, 2},
		{"a type change is a replace", `{"a":{"b":1}}`, `{"a":[1]}`, 1},
		{"null and absent differ", `{"a":null}`, `{}`, 1},
		{"escaped keys are decoded", `{"a\/b":1,"\u0063":2}`, `{"a/b":1,"c":3}`, 1},
		{"whitespace does not matter", "{ \"a\" : [ 1 , 2 ] }", `{"a":[1,2,3]}`, 1},
		{"duplicate keys replace the object", `{"a":1,"a":2}`, `{"a":3}`, 1},
		{"the root changes type", `{"a":1}`, `[1]`, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if ops := checkDiff(t, []byte(tc.a), []byte(tc.b)); len(ops) != tc.ops {
				t.Errorf("got %d operations %v, want %d", len(ops), ops, tc.ops)
			}
		})
	}
	if _, err := patch.Diff([]byte(`{`), []byte(`{}`)); err == nil {
		t.Error("malformed JSON gave no error")
	}
}

func TestDiffOnTheBenchmarkPodMatchesCreate(t *testing.T) {
	pod := fixtures.Pod("ns", "web")
	a := fixtures.JSON(pod)
	pod.Labels["synchook.io/hooked"] = "true"
	pod.Spec.Containers[1].Env = append(pod.Spec.Containers[1].Env, pod.Spec.Containers[0].Env[0])
	pod.Status.Conditions = pod.Status.Conditions[:2]
	b := fixtures.JSON(pod)
	ops := checkDiff(t, a, b)
	want, _ := createPatch(a, b)
	if len(ops) != len(want) {
		t.Errorf("Diff gave %d operations %v, Create %d %v", len(ops), ops, len(want), want)
	}
}

func FuzzDiff(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`{"a":2,"b":[1,2]}`))
	f.Add([]byte(`{"metadata":{"labels":{"x":"y"}}}`), []byte(`{"metadata":{"labels":{"x~/":"z"},"annotations":null}}`))
	f.Add([]byte(`[1,{"a":[]}]`), []byte(`[1,{"a":[true,false,null]},"s"]`))
	f.Add([]byte(`{"a":1,"a":2}`), []byte(`{"a":{"\u00e9":1e400}}`))
	f.Add(fixtures.JSON(fixtures.Service("ns", "s")), fixtures.JSON(fixtures.Secret("ns", "s", "v")))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if !json.Valid(a) || !json.Valid(b) {
			if _, err := patch.Diff(a, b); err == nil {
				t.Fatal("invalid JSON gave no error")
			}
			return
		}
		if !isContainer(a) || !isContainer(b) {
			return // appliers (and Kubernetes objects) need container documents
		}
		if hasEmptyKey(a) || hasEmptyKey(b) {
			// evanphx/json-patch treats the empty reference token of "//" as "nothing" and
			// silently skips the operation; Kubernetes keys are never empty.
			return
		}
		var av, bv any
		// documents whose values json cannot represent as any (e.g. 1e400) are out of scope
		if json.Unmarshal(a, &av) != nil || json.Unmarshal(b, &bv) != nil {
			return
		}
		ops, err := patch.Diff(a, b)
		if err != nil {
			t.Fatal(err)
		}
		pj, _ := patch.Marshal(ops)
		got, err := patch.Apply(a, pj)
		if err != nil {
			t.Fatalf("apply %s to %s: %v", pj, a, err)
		}
		var gv any
		if err := json.Unmarshal(got, &gv); err != nil {
			t.Fatalf("result %s: %v", got, err)
		}
		if !reflect.DeepEqual(gv, bv) {
			t.Fatalf("Diff(%s, %s) = %s gives %s", a, b, pj, got)
		}
	})
}

func isContainer(doc []byte) bool {
	t := bytes.TrimSpace(doc)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

func hasEmptyKey(doc []byte) bool {
	var v any
	_ = json.Unmarshal(doc, &v)
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "" || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// Below an empty key the diff replaces the value whole: evanphx/json-patch (kube-apiserver's
// applier) cannot address into it (FuzzApplyOps found "//0").
func TestDiffBelowAnEmptyKeyReplacesItWhole(t *testing.T) {
	for _, c := range [][2]string{{`{"":[0],"b":{"":""}}`, `{"":[]}`}, {`{"":{"a":1}}`, `{"":{"a":2,"b":3}}`}, {`{"x":{"":[1,2]}}`, `{"x":{"":[2]}}`}} {
		ops, err := patch.Diff([]byte(c[0]), []byte(c[1]))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := patch.Marshal(ops)
		got, err := patch.Apply([]byte(c[0]), p)
		var gv, wv any
		_ = json.Unmarshal(got, &gv)
		_ = json.Unmarshal([]byte(c[1]), &wv)
		if err != nil || !reflect.DeepEqual(gv, wv) {
			t.Errorf("%s → %s: patch %s gives %s, %v", c[0], c[1], p, got, err)
		}
	}
}
