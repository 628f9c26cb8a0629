package answer_test

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/internal/answer"
)

// A hook removed the label "host" and the pod's nodeName. vcluster decodes the answer into the
// pod it sent, so the answer resets the labels map before giving the new one, and sets
// nodeName to "" explicitly.
func ExampleFor() {
	request := []byte(`{"metadata":{"name":"web","labels":{"app":"web","host":"blue"}},"spec":{"nodeName":"node-7","containers":null}}`)
	hooked := []byte(`{"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"containers":null}}`)
	answer, err := answer.For(&corev1.Pod{}, request, hooked)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(answer))

	var pod corev1.Pod // as vcluster holds it
	_ = json.Unmarshal(request, &pod)
	_ = json.Unmarshal(answer, &pod)
	fmt.Printf("labels %v, nodeName %q\n", pod.Labels, pod.Spec.NodeName)
	// Output:
	// {"metadata":{"name":"web","labels":null,"labels":{"app":"web"}},"spec":{"nodeName":"","containers":null}}
	// labels map[app:web], nodeName ""
}
