package answer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/answer"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/patch"
)

// examplePod returns a Pod with every kind of field the decoding rules care about set: label
// and annotation maps, omitempty strings, bools and ints, pointers to scalars, structs and
// metav1.Time, slices of structs, a map of Quantities and an owner reference.
func examplePod() *corev1.Pod {
	start := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "tenant", UID: "0b6d1b8e-3c1e-4f7e-9c39-8f2b1f6f7a10",
			CreationTimestamp: start,
			Labels:            map[string]string{"app": "web", "host.example.com/pool": "blue"},
			Annotations:       map[string]string{"owner": "team-a", "host.example.com/internal": "x"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "1", Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName:                     "node-7",
			HostNetwork:                  true,
			ActiveDeadlineSeconds:        ptr.To[int64](600),
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext:              &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true)},
			Containers: []corev1.Container{
				{
					Name: "app", Image: "nginx", Command: []string{"/bin/app", "--serve"}, WorkingDir: "/srv",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 80}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
					}},
				},
				{Name: "sidecar", Image: "busybox"},
			},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.7", PodIP: "10.1.0.9", StartTime: &start},
	}
}

func exampleService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
}

func exampleSecret() *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "tenant"},
		Data:       map[string][]byte{"password": []byte("s3cr3t"), "host-token": {0, 1, 0xff}},
		Type:       corev1.SecretTypeOpaque,
	}
}

func podCase(fn func(*corev1.Pod)) func(client.Object) {
	return func(o client.Object) { fn(o.(*corev1.Pod)) }
}

// TestAnswerDecodedIntoTheRequestObjectGivesTheHookedObject is the proof of the package's
// decoding rules: for every kind of change, vcluster's way of reading the answer —
// json.Unmarshal into the very object it sent — gives exactly the hooked object, while reading
// the plain hooked JSON that way does not for every case marked plainFails.
func TestAnswerDecodedIntoTheRequestObjectGivesTheHookedObject(t *testing.T) {
	cases := []struct {
		name       string
		object     func() client.Object
		setup      func(client.Object) // changes the object vcluster holds without changing its JSON
		hook       func(client.Object)
		plainFails bool
	}{
		{"a removed label is gone", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			delete(p.Labels, "host.example.com/pool")
		}), true},
		{"a removed annotation is gone", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			delete(p.Annotations, "host.example.com/internal")
		}), true},
		{"removing every label leaves no labels", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Labels = nil
		}), true},
		{"an added and an overwritten label arrive", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Labels["tenant"], p.Labels["app"] = "a", "web2"
		}), false},
		{"an emptied omitempty string is empty", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status.HostIP = "", ""
		}), true},
		{"a false omitempty bool is false", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Spec.HostNetwork = false
		}), true},
		{"a nil pointer to an int and to a bool is nil", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Spec.ActiveDeadlineSeconds, p.Spec.AutomountServiceAccountToken = nil, nil
		}), true},
		{"a nil pointer to a struct is nil", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Spec.SecurityContext = nil
		}), true},
		{"a field cleared inside a pointer to a struct is cleared", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsUser = nil
		}), true},
		{"a nil pointer to a metav1.Time is nil", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Status.StartTime = nil
		}), true},
		{"a zeroed omitzero metav1.Time is zero", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.CreationTimestamp = metav1.Time{}
		}), true},
		{"a removed first slice element does not leave its fields in the next one", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Spec.Containers = p.Spec.Containers[1:]
		}), true},
		{"a field removed inside a slice element is gone", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Spec.Containers[0].Command, p.Spec.Containers[0].WorkingDir, p.Spec.Containers[0].Ports[0].HostPort = nil, "", 0
		}), true},
		{"an appended element does not pick up stale data beyond the slice's length", func() client.Object { return examplePod() }, func(o client.Object) {
			p := o.(*corev1.Pod)
			grown := append(make([]corev1.Toleration, 0, 4), p.Spec.Tolerations...)
			_ = append(grown, corev1.Toleration{Key: "stale", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)})
			p.Spec.Tolerations = grown // length 1, a stale element at index 1
		}, podCase(func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpExists})
		}), true},
		{"a removed key of a map of quantities is gone", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory)
		}), true},
		{"a whole struct set to its zero value is zero", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{}
		}), true},
		{"removed owner references are gone", func() client.Object { return examplePod() }, nil, podCase(func(p *corev1.Pod) {
			p.OwnerReferences = nil
		}), true},
		{"an IntOrString turned from a name into a number keeps no name", func() client.Object { return exampleService() }, nil, func(o client.Object) {
			o.(*corev1.Service).Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
		}, true},
		{"an IntOrString behind a pointer turned from a percentage into a number keeps no percentage", func() client.Object {
			return &policyv1.PodDisruptionBudget{
				TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tenant"},
				Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))},
			}
		}, nil, func(o client.Object) {
			o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable = ptr.To(intstr.FromInt32(2))
		}, true},
		{"a removed key of a secret's data is gone", func() client.Object { return exampleSecret() }, nil, func(o client.Object) {
			delete(o.(*corev1.Secret).Data, "host-token")
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			request, err := json.Marshal(tc.object())
			if err != nil {
				t.Fatal(err)
			}
			hooked := runHook(t, tc.object(), request, tc.hook)
			want := fresh(t, tc.object, hooked)

			// vcluster: json.Unmarshal(answer, obj) into the object it encoded as request.
			answer, err := answer.For(tc.object(), request, hooked)
			if err != nil {
				t.Fatal(err)
			}
			got := held(tc.object, tc.setup)
			if err := json.Unmarshal(answer, got); err != nil {
				t.Fatalf("json.Unmarshal(answer): %v\nanswer: %s", err, answer)
			}
			if diff := compare(got, want); diff != "" {
				t.Errorf("decoded into the request object: %s\nanswer: %s", diff, answer)
			}

			// The plain hooked JSON read the same way: the bug this package exists for.
			plain := held(tc.object, tc.setup)
			if err := json.Unmarshal(hooked, plain); err != nil {
				t.Fatal(err)
			}
			if diff := compare(plain, want); (diff != "") != tc.plainFails {
				t.Errorf("plain hooked JSON decoded into the request object: differs = %v, want %v (%s)", diff != "", tc.plainFails, diff)
			}

			// A fresh decoder (the next plugin, or Kubernetes' own decoder) also gets the
			// hooked object: repeated keys are applied in order.
			for name, unmarshal := range map[string]func([]byte, any) error{
				"encoding/json": json.Unmarshal, "sigs.k8s.io/json": kjson.UnmarshalCaseSensitivePreserveInts,
			} {
				clean := reflect.New(reflect.TypeOf(tc.object()).Elem()).Interface().(client.Object)
				if err := unmarshal(answer, clean); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if diff := compare(clean, want); diff != "" {
					t.Errorf("%s into a new object: %s", name, diff)
				}
			}
		})
	}
}

// runHook runs fn as a CreatePhysical hook through a Registry on request and returns the
// hooked JSON (request with the chain's patch applied).
func runHook(t *testing.T, obj client.Object, request []byte, fn func(client.Object)) []byte {
	t.Helper()
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("under-test", obj, []hooks.HookType{hooks.CreatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		fn(o)
		return o, nil
	}))
	gvk, err := engine.ObjectGVK(request)
	if err != nil {
		t.Fatal(err)
	}
	res, err := reg.Mutate(t.Context(), gvk, hooks.CreatePhysical, request)
	if err != nil {
		t.Fatal(err)
	}
	if res.Patch == nil {
		t.Fatal("the hook changed nothing")
	}
	hooked, err := res.Object()
	if err != nil {
		t.Fatal(err)
	}
	return hooked
}

// held returns the object as vcluster holds it when it decodes the answer: the request object,
// with setup applied.
func held(object func() client.Object, setup func(client.Object)) client.Object {
	o := object()
	if setup != nil {
		setup(o)
	}
	return o
}

// fresh decodes hooked into a new object: the hooked object.
func fresh(t *testing.T, object func() client.Object, hooked []byte) client.Object {
	t.Helper()
	o := reflect.New(reflect.TypeOf(object()).Elem()).Interface().(client.Object)
	if err := json.Unmarshal(hooked, o); err != nil {
		t.Fatal(err)
	}
	return o
}

// compare returns "" when got and want are semantically equal (equality.Semantic) and encode
// to the same JSON, else a description.
func compare(got, want client.Object) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		return "JSON differs:\n got  " + string(g) + "\n want " + string(w)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		return "same JSON, but not semantically equal (a hidden Go field differs)"
	}
	return ""
}

func TestAnswerOfAnUnchangedObjectIsTheObject(t *testing.T) {
	request, _ := json.Marshal(examplePod())
	answer, err := answer.For(&corev1.Pod{}, request, request)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal(answer, &a)
	_ = json.Unmarshal(request, &b)
	if !reflect.DeepEqual(a, b) || bytes.Count(answer, []byte(`"metadata":`)) != 1 {
		t.Errorf("answer %s, want the request object without repeated keys", answer)
	}
}

func TestAnswerForATypeThatDecodesItselfIsTheHookedJSON(t *testing.T) {
	request := []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"hostOnly":"x"}}`)
	hooked := []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{}}`)
	answer, err := answer.For(&unstructured.Unstructured{}, request, hooked)
	if err != nil || !bytes.Equal(answer, hooked) {
		t.Fatalf("Answer = %s, %v; want the hooked JSON itself", answer, err)
	}
	u := &unstructured.Unstructured{}
	_ = json.Unmarshal(request, u)
	if err := json.Unmarshal(answer, u); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(u.Object, "spec", "hostOnly"); found {
		t.Errorf("an Unstructured kept spec.hostOnly: it should replace its content when decoding")
	}
}

func TestAnswerRejectsMalformedJSON(t *testing.T) {
	good, _ := json.Marshal(examplePod())
	for _, tc := range []struct{ name, request, hooked string }{
		{"a malformed request", `{`, string(good)},
		{"a malformed hooked object", string(good), `{"a":`},
		{"a hooked array", string(good), `[]`},
	} {
		t.Run(tc.name+" is an error", func(t *testing.T) {
			if _, err := answer.For(&corev1.Pod{}, []byte(tc.request), []byte(tc.hooked)); err == nil {
				t.Error("no error")
			}
		})
	}
}

// BenchmarkAnswer measures For for a pod that lost a label and its nodeName.
func BenchmarkAnswer(b *testing.B) {
	request, _ := json.Marshal(examplePod())
	hookedPod := examplePod()
	delete(hookedPod.Labels, "host.example.com/pool")
	hookedPod.Spec.NodeName = ""
	hooked, _ := json.Marshal(hookedPod)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := answer.For(&corev1.Pod{}, request, hooked); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOfAnswersEditsThatUndoOneAnother is Of on Docs whose edits add a member and take it off
// again, or replace the whole document, as a write that carries synchook's own undo edits its
// request (the undo restores what the hooks took off, the chain takes it off again): decoded
// into the request's object, and into a new one, the answer gives the edited document.
func TestOfAnswersEditsThatUndoOneAnother(t *testing.T) {
	secret := []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","labels":{"again":"1"}},"type":"Opaque"}`)
	pod, err := json.Marshal(examplePod())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		obj     any
		request []byte
		ops     string
	}{
		{"a Secret's data map restored and taken off again", &corev1.Secret{}, secret, `[
			{"op":"add","path":"/data","value":{"password":"cHc="}},
			{"op":"remove","path":"/data"},
			{"op":"add","path":"/metadata/labels/b","value":"2"}]`},
		{"a pointer to a struct added and taken off again", &corev1.Pod{}, pod, `[
			{"op":"add","path":"/spec/affinity","value":{"nodeAffinity":{}}},
			{"op":"remove","path":"/spec/affinity"}]`},
		{"a struct added and taken off again", &corev1.Secret{}, []byte(`{"kind":"Secret"}`), `[
			{"op":"add","path":"/metadata","value":{"name":"s"}},
			{"op":"remove","path":"/metadata"}]`},
		{"a map key added and taken off again", &corev1.Pod{}, pod, `[
			{"op":"add","path":"/metadata/labels/tenant","value":"a"},
			{"op":"remove","path":"/metadata/labels/tenant"}]`},
		{"a member removed, set again and removed again", &corev1.Pod{}, pod, `[
			{"op":"remove","path":"/spec/nodeName"},
			{"op":"add","path":"/spec/nodeName","value":"node-8"},
			{"op":"remove","path":"/spec/nodeName"}]`},
		{"the whole document replaced", &corev1.Pod{}, pod, `[
			{"op":"replace","path":"","value":{"kind":"Pod","metadata":{"name":"other","labels":{"a":"b"}}}}]`},
		{"the whole document replaced and then edited", &corev1.Pod{}, pod, `[
			{"op":"add","path":"","value":{"kind":"Pod","metadata":{"name":"other","labels":{"a":"b"}}}},
			{"op":"remove","path":"/metadata/labels/a"},
			{"op":"add","path":"/spec","value":{"nodeName":"n"}}]`},
	} {
		t.Run(tc.name+" answers the edited document", func(t *testing.T) {
			var ops []patch.Operation
			if err := json.Unmarshal([]byte(tc.ops), &ops); err != nil {
				t.Fatal(err)
			}
			doc := jsondoc.New(tc.request)
			if err := doc.ApplyOps(ops); err != nil {
				t.Fatal(err)
			}
			edited, err := doc.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			a, err := answer.Of(reflect.TypeOf(tc.obj), doc)
			if err != nil {
				t.Fatalf("Of: %v", err)
			}
			typ := reflect.TypeOf(tc.obj).Elem()
			decode := func(docs ...[]byte) string {
				v := reflect.New(typ).Interface()
				for _, d := range docs {
					if err := json.Unmarshal(d, v); err != nil {
						t.Fatalf("decode %s: %v", d, err)
					}
				}
				out, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				return string(out)
			}
			want := decode(edited)
			if got := decode(tc.request, a); got != want {
				t.Errorf("decoded into the request's object:\n got  %s\n want %s\nanswer %s", got, want, a)
			}
			if got := decode(a); got != want {
				t.Errorf("decoded fresh:\n got  %s\n want %s\nanswer %s", got, want, a)
			}
		})
	}
}
