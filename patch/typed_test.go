package patch_test

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/patch"
)

// checkTyped asserts that DiffTyped(a, b) gives exactly the operations of its oracle,
// DiffMarshaled of the two encodings.
func checkTyped(t *testing.T, a, b *corev1.Pod) {
	t.Helper()
	ea, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := patch.DiffMarshaled(ea, eb)
	got, err := patch.DiffTyped(a, b)
	if err != nil {
		t.Fatalf("DiffTyped: %v", err)
	}
	gj, _ := patch.Marshal(got)
	wj, _ := patch.Marshal(want)
	if string(gj) != string(wj) {
		t.Fatalf("DiffTyped gives\n%s\nencode + DiffMarshaled gives\n%s", gj, wj)
	}
}

func TestDiffTypedIsDiffMarshaledOfTheEncodings(t *testing.T) {
	base := fixtures.Pod("ns", "web")
	ts := metav1.Date(2027, 1, 2, 3, 4, 5, 0, base.CreationTimestamp.Location())
	for name, change := range map[string]func(p *corev1.Pod){
		"nothing":               func(*corev1.Pod) {},
		"a nodeSelector":        func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "tenants"} },
		"an empty nodeSelector": func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{} },
		"a label":               func(p *corev1.Pod) { p.Labels["team"] = "a" },
		"a label removed":       func(p *corev1.Pod) { delete(p.Labels, "app.example.com/label-3") },
		"labels nil":            func(p *corev1.Pod) { p.Labels = nil },
		"labels empty":          func(p *corev1.Pod) { p.Labels = map[string]string{} },
		"an image":              func(p *corev1.Pod) { p.Spec.Containers[1].Image = "mirror.example/x:1" },
		"a container added":     func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "x"}) },
		"a container removed":   func(p *corev1.Pod) { p.Spec.Containers = p.Spec.Containers[1:] },
		"an env var's value":    func(p *corev1.Pod) { p.Spec.Containers[0].Env[2].Value = "text" },
		"a quantity": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2")
		},
		"a quantity under another key": func(p *corev1.Pod) {
			l := p.Spec.Containers[0].Resources.Limits
			l["example.com/gpu"] = l[corev1.ResourceCPU]
			delete(l, corev1.ResourceCPU)
		},
		"a quantity written another way": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1000m")
		},
		"requests empty":               func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{} },
		"requests nil":                 func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = nil },
		"limits shared with the other": func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = base.Spec.Containers[0].Resources.Limits },
		"a quantity's format": func(p *corev1.Pod) {
			p.Spec.Containers[1].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("134217728")
		},
		"a probe port":                  func(p *corev1.Pod) { p.Spec.Containers[0].LivenessProbe.HTTPGet.Port = intstr.FromString("http") },
		"a probe removed":               func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = nil },
		"the creation timestamp":        func(p *corev1.Pod) { p.CreationTimestamp = ts },
		"the creation timestamp zeroed": func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{} },
		"the status":                    func(p *corev1.Pod) { p.Status = corev1.PodStatus{} },
		"a scalar to zero":              func(p *corev1.Pod) { p.Spec.SchedulerName = "" },
		"a pointer scalar":              func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = new(int64(30)) },
		"affinity":                      func(p *corev1.Pod) { p.Spec.Affinity = &corev1.Affinity{} },
		"a toleration's key":            func(p *corev1.Pod) { p.Spec.Tolerations[0].Key = "k/~x" },
		"tolerations nil":               func(p *corev1.Pod) { p.Spec.Tolerations = nil },
		"an owner reference":            func(p *corev1.Pod) { p.OwnerReferences[0].Controller = new(true) },
		"name and kind":                 func(p *corev1.Pod) { p.Name, p.Kind = "other", "" },
	} {
		t.Run(name, func(t *testing.T) {
			after := base.DeepCopy()
			change(after)
			checkTyped(t, base, after)
			checkTyped(t, after, base)
		})
	}
}

func TestDiffTypedComparesLongMapsOfQuantities(t *testing.T) {
	before := fixtures.Pod("ns", "web")
	before.Spec.Overhead = corev1.ResourceList{}
	for i := range 12 { // a long ResourceList (quantityMapEqual); TestDiffTypedSkipsOnlyFieldsItsQuickEqualitySpeaksFor has a long map of ints (mapEqual)
		before.Spec.Overhead[corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))] = resource.MustParse("1")
	}
	for name, change := range map[string]func(corev1.ResourceList){
		"nothing":         func(corev1.ResourceList) {},
		"a value":         func(l corev1.ResourceList) { l["example.com/r7"] = resource.MustParse("2") },
		"a key":           func(l corev1.ResourceList) { l["example.com/x"] = l["example.com/r7"]; delete(l, "example.com/r7") },
		"the same value":  func(l corev1.ResourceList) { l["example.com/r7"] = resource.MustParse("1000m") },
		"one entry fewer": func(l corev1.ResourceList) { delete(l, "example.com/r0") },
	} {
		t.Run(name, func(t *testing.T) {
			after := before.DeepCopy()
			change(after.Spec.Overhead)
			checkTyped(t, before, after)
			checkTyped(t, after, before)
		})
	}
}

func TestDiffTypedRefusesOtherValues(t *testing.T) {
	for _, pair := range [][2]any{{&corev1.Pod{}, &corev1.Service{}}, {corev1.Pod{}, corev1.Pod{}}, {(*corev1.Pod)(nil), &corev1.Pod{}}, {&metav1.Time{}, &metav1.Time{}}} {
		if _, err := patch.DiffTyped(pair[0], pair[1]); err == nil {
			t.Errorf("DiffTyped(%T, %T): no error", pair[0], pair[1])
		}
	}
}

// FuzzDiffTyped decodes two Pods from the fuzzer's JSON and checks DiffTyped against its oracle,
// DiffMarshaled of their encodings.
func FuzzDiffTyped(f *testing.F) {
	pod := fixtures.JSON(fixtures.Pod("ns", "web"))
	f.Add(pod, pod)
	f.Add(pod, []byte(`{"metadata":{"name":"web","labels":{"a":"b"}},"spec":{"nodeSelector":{"x":"y"},"containers":[{"name":"c","image":"i"}]}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1"}}}],"affinity":{}}}`), []byte(`{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1000m"}}},{"name":"b"}]}}`))
	f.Add([]byte(`{"metadata":{"creationTimestamp":"2026-01-01T00:00:00Z","annotations":{}}}`), []byte(`{"metadata":{"annotations":null},"status":{"startTime":null}}`))
	f.Fuzz(func(t *testing.T, x, y []byte) {
		a, b := &corev1.Pod{}, &corev1.Pod{}
		if kjson.UnmarshalCaseSensitivePreserveInts(x, a) != nil || kjson.UnmarshalCaseSensitivePreserveInts(y, b) != nil {
			t.Skip()
		}
		if _, err := json.Marshal(a); err != nil {
			t.Skip()
		}
		if _, err := json.Marshal(b); err != nil {
			t.Skip()
		}
		checkTyped(t, a, b)
		if !reflect.DeepEqual(a, a.DeepCopy()) {
			t.Skip()
		}
		checkTyped(t, a, a.DeepCopy())
	})
}

// BenchmarkDiffTyped compares DiffTyped with what it replaces, an encoding of both objects and
// DiffMarshaled, on the benchmark Pod with one spec change.
func BenchmarkDiffTyped(b *testing.B) {
	before := fixtures.Pod("ns", "web")
	after := before.DeepCopy()
	after.Spec.NodeSelector = map[string]string{"pool": "tenants"}
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ops, err := patch.DiffTyped(before, after); err != nil || len(ops) != 1 {
				b.Fatal(ops, err)
			}
		}
	})
	b.Run("encode+diff", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x, _ := json.Marshal(before)
			y, _ := json.Marshal(after)
			if ops := patch.DiffMarshaled(x, y); len(ops) != 1 {
				b.Fatal(ops)
			}
		}
	})
}

// quirks is a struct with fields that are alike by DiffTyped's quick equality (the members
// encoding/json writes) where encoding/json may yet write one and leave out the other: omitzero
// fields whose IsZero reads a field it does not write, a float's 0 and -0 under omitempty.
// Its embedded pointer's field has no fixed offset.
type quirks struct {
	F float64        `json:"f,omitempty"`
	Z zeroish        `json:"z,omitzero"`
	L marks          `json:"l,omitzero"`
	S []string       `json:"s,omitempty"`
	M map[string]int `json:"m,omitempty"`
	*Inner
}

// longMap returns a map of n keys k0… to their index, key changed's value 100 (-1: none),
// longer than the maps mapEqual walks to find the other map's key.
func longMap(n, changed int) map[string]int {
	m := map[string]int{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = i
	}
	if changed >= 0 {
		m[fmt.Sprintf("k%d", changed)] = 100
	}
	return m
}

// zeroish is zero only when its unencoded field is.
type zeroish struct {
	A      string `json:"a"`
	hidden int
}

func (z zeroish) IsZero() bool { return z.A == "" && z.hidden == 0 }

// marks is zero when each of its elements is (zeroish.IsZero).
type marks []zeroish

func (m marks) IsZero() bool {
	for _, z := range m {
		if !z.IsZero() {
			return false
		}
	}
	return true
}

// Inner is embedded through a pointer in quirks.
type Inner struct {
	N string `json:"n,omitempty"`
}

func TestDiffTypedSkipsOnlyFieldsItsQuickEqualitySpeaksFor(t *testing.T) {
	for name, pair := range map[string][2]quirks{
		"0 and -0 under omitempty":                                    {{F: 0}, {F: math.Copysign(0, -1)}},
		"an omitzero struct whose IsZero reads a field never written": {{Z: zeroish{hidden: 1}}, {}},
		"an omitzero slice whose IsZero reads a field never written":  {{L: marks{{hidden: 1}}}, {L: marks{{}}}},
		"an empty slice and none":                                     {{S: []string{}}, {}},
		"an empty map and none":                                       {{M: map[string]int{}}, {M: map[string]int{"a": 0}}},
		"a long map, one value changed":                               {{M: longMap(12, 0)}, {M: longMap(12, 7)}},
		"a long map, one key changed":                                 {{M: longMap(12, -1)}, {M: func() map[string]int { m := longMap(12, -1); delete(m, "k3"); m["x"] = 3; return m }()}},
		"the embedded pointer's field":                                {{Inner: &Inner{N: "x"}}, {Inner: &Inner{N: "y"}}},
		"the embedded pointer set":                                    {{}, {Inner: &Inner{N: "y"}}},
		"alike":                                                       {{F: 1, S: []string{"a"}, Inner: &Inner{}}, {F: 1, S: []string{"a"}, Inner: &Inner{}}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, p := range [][2]*quirks{{&pair[0], &pair[1]}, {&pair[1], &pair[0]}} {
				ea, _ := json.Marshal(p[0])
				eb, _ := json.Marshal(p[1])
				want, _ := patch.Marshal(patch.DiffMarshaled(ea, eb))
				ops, err := patch.DiffTyped(p[0], p[1])
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := patch.Marshal(ops); string(got) != string(want) {
					t.Errorf("%s -> %s: DiffTyped gives %s, encode + DiffMarshaled gives %s", ea, eb, got, want)
				}
			}
		})
	}
}
