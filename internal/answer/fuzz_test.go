package answer_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/internal/answer"
	"github.com/synchook/synchook/internal/fixtures"
)

// FuzzAnswer decodes two Pods from the fuzzer's JSON — the object vcluster holds and the hooked
// one — and checks For against its oracle, the whole-document builder this package had before
// (answer.WholeAnswer): each answer, decoded into the object vcluster holds (as vcluster does)
// and into a new one, gives the hooked object.
func FuzzAnswer(f *testing.F) {
	pod := fixtures.JSON(fixtures.Pod("ns", "web"))
	example, _ := json.Marshal(examplePod())
	f.Add(pod, example)
	f.Add(example, pod)
	f.Add(example, []byte(`{"metadata":{"name":"web-0","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":1}]}],"securityContext":{}}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1","memory":"1Mi"}}}],"affinity":{"nodeAffinity":{}}}}`), []byte(`{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1000m"}}},{"name":"b"}]}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"a","args":["x","y"]}]}}`), []byte(`{"spec":{"containers":[{"name":"a","args":["x","z"]}]}}`)) // an array element replaced
	f.Fuzz(func(t *testing.T, x, y []byte) {
		held, hookedPod := &corev1.Pod{}, &corev1.Pod{}
		if json.Unmarshal(x, held) != nil || json.Unmarshal(y, hookedPod) != nil {
			t.Skip()
		}
		request, err := json.Marshal(held) // what vcluster sends
		if err != nil {
			t.Skip()
		}
		hooked, err := json.Marshal(hookedPod)
		if err != nil {
			t.Skip()
		}
		want := decodeFresh(t, hooked)
		for name, build := range map[string]func(any, []byte, []byte) ([]byte, error){"For": answer.For, "the oracle": answer.WholeAnswer} {
			a, err := build(&corev1.Pod{}, request, hooked)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			into := &corev1.Pod{}
			if err := json.Unmarshal(request, into); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(a, into); err != nil {
				t.Fatalf("%s: answer %s does not decode: %v", name, a, err)
			}
			if got := encode(t, into); got != want {
				t.Fatalf("%s: decoded into the request object gives\n%s\nwant\n%s\nanswer %s", name, got, want, a)
			}
			if got := decodeFresh(t, a); got != want {
				t.Fatalf("%s: decoded fresh gives\n%s\nwant\n%s", name, got, want)
			}
		}
	})
}

func decodeFresh(t *testing.T, b []byte) string {
	t.Helper()
	p := &corev1.Pod{}
	if err := json.Unmarshal(b, p); err != nil {
		t.Fatal(err)
	}
	return encode(t, p)
}

func encode(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
