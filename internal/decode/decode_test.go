package decode

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/jsonscan"
)

// anyObject is an object whose type reaches interface values.
type anyObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Data              map[string]any `json:"data,omitempty"`
}

func (o *anyObject) DeepCopyObject() runtime.Object { c := *o; return &c }

func TestDecodeKeepsIntegersInInterfaceValuesAsKubernetesDoes(t *testing.T) {
	if fastDecodes(reflect.TypeFor[anyObject]()) || !fastDecodes(reflect.TypeFor[corev1.Pod]()) {
		t.Fatal("fastDecodes: want false for a type with interface values, true for a Pod")
	}
	o := &anyObject{}
	if err := Object([]byte(`{"metadata":{"name":"x"},"data":{"n":1,"f":1.5}}`), o); err != nil {
		t.Fatal(err)
	}
	if n, ok := o.Data["n"].(int64); !ok || n != 1 || o.Data["f"] != 1.5 {
		t.Fatalf("data: %#v, want n int64(1), f 1.5", o.Data)
	}
}

func TestDecodeGivesWhatKubernetesDecoderGives(t *testing.T) {
	pod := string(fixtures.JSON(fixtures.Pod("ns", "web")))
	for name, raw := range map[string]string{
		"the benchmark Pod":            pod,
		"a repeated member":            `{"metadata":{"name":"a","name":"b"},"spec":{"nodeName":"x"},"spec":{"schedulerName":"y"}}`,
		"null over an object":          `{"spec":{"nodeName":"x"},"spec":null}`,
		"names in another case":        `{"Metadata":{"Name":"a"},"spec":{"NodeName":"x"}}`,
		"invalid UTF-8":                "{\"metadata\":{\"name\":\"a\xff\"}}",
		"a number in a string field":   `{"metadata":{"name":1}}`,
		"a fraction in an int field":   `{"spec":{"priority":1.5}}`,
		"an exponent in an int field":  `{"spec":{"priority":1e3}}`,
		"a quantity":                   `{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1000m"}}}]}}`,
		"a bad quantity":               `{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"lots"}}}]}}`,
		"an int-or-string":             `{"spec":{"containers":[{"name":"c","ports":[{"containerPort":80}],"livenessProbe":{"httpGet":{"port":"http"}}}]}}`,
		"a time":                       `{"metadata":{"creationTimestamp":"2026-01-02T03:04:05Z"}}`,
		"a bad time":                   `{"metadata":{"creationTimestamp":"yesterday"}}`,
		"unknown members":              `{"x":1,"spec":{"y":[1,2,{"z":null}]}}`,
		"an escaped name":              `{"metadata":{"n\u0061me":"a"}}`,
		"trailing data":                `{"metadata":{}} {}`,
		"bytes in a Secret (as a Pod)": `{"data":{"k":"dmFsdWU="}}`,
	} {
		t.Run(name, func(t *testing.T) { checkDecode(t, []byte(raw)) })
	}
}

// checkDecode checks decode against kjson for raw as a Pod, a Secret and a Deployment: the
// same error or none, and the same object.
func checkDecode(t *testing.T, raw []byte) {
	t.Helper()
	for _, newObject := range []func() client.Object{
		func() client.Object { return &corev1.Pod{} },
		func() client.Object { return &corev1.Secret{} },
		func() client.Object { return &appsv1.Deployment{} },
	} {
		got, want := newObject(), newObject()
		gotErr := Object(raw, got)
		wantErr := kjson.UnmarshalCaseSensitivePreserveInts(raw, want)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("%T from %q: error %v, kjson's %v", got, raw, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%T from %q:\n got %#v\nwant %#v", got, raw, got, want)
		}
	}
}

// FuzzDecode holds decode to its oracle, kjson: for every JSON object the fuzzer makes, as a Pod,
// a Secret and a Deployment, the same error or none and the same object.
func FuzzDecode(f *testing.F) {
	f.Add(fixtures.JSON(fixtures.Pod("ns", "web")))
	f.Add(fixtures.JSON(fixtures.Secret("ns", "s", "value")))
	f.Add(fixtures.JSON(fixtures.Service("ns", "svc")))
	f.Add([]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"i"}]}},"replicas":2,"selector":{"matchLabels":{"a":"b"}}}}`))
	f.Add([]byte(`{"metadata":{"name":"a","name":"b"},"spec":{"nodeName":"x"},"spec":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if i := jsonscan.SkipSpace(raw, 0); i >= len(raw) || raw[i] != '{' {
			t.Skip()
		}
		checkDecode(t, raw)
	})
}
