package hoststore_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/hoststore"
	"github.com/synchook/synchook/internal/undo"
)

// The configs the fuzz target picks from: strips that can empty what they strip from, and a
// labels hook that can create the map.
var fuzzConfigs = []string{
	`{hooks: [{name: s, resources: [{apiVersion: v1, kind: Pod}], types: [CreatePhysical, UpdatePhysical], strip: {paths: ["/spec/tolerations/*"]}}]}`,
	`{hooks: [{name: s, resources: [{apiVersion: v1, kind: Pod}], types: [CreatePhysical, UpdatePhysical], strip: {paths: [/metadata/labels/app, /spec/nodeSelector/disk]}}]}`,
	`{hooks: [{name: s, resources: [{apiVersion: v1, kind: Pod}], types: [CreatePhysical, UpdatePhysical], strip: {paths: ["/spec/tolerations/0", "/spec/containers/0/env/*"]}}]}`,
	`{hooks: [{name: l, resources: [{apiVersion: v1, kind: Pod}], types: [CreatePhysical, UpdatePhysical], labels: {labels: {tenant: a}}}]}`,
	// a typed chain re-encodes the pod: the emptied list goes as a whole (e2e/vcluster found it)
	`{hooks: [{name: l, resources: [{apiVersion: v1, kind: Pod}], types: [CreatePhysical, UpdatePhysical], labels: {labels: {tenant: a}}}, {name: s, resources: [{apiVersion: v1, kind: Pod}], types: [CreatePhysical, UpdatePhysical], strip: {paths: ["/spec/tolerations/*"]}}]}`,
	`{hooks: [{name: s, resources: [{apiVersion: v1, kind: Secret}], types: [CreatePhysical, UpdatePhysical], strip: {paths: [/data/password]}}]}`,
}

var (
	podGVK    = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// tolerationsOf are the tolerations a fuzz pod draws from; the last two are those a
// tenant's apiserver and the host's (DefaultTolerationSeconds) add.
var tolerationsOf = []corev1.Toleration{
	{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
	{Key: "zone", Operator: corev1.TolerationOpExists},
	{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
	{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
}

// hostAdmission is the host's DefaultTolerationSeconds on a stored pod: it adds the two
// default tolerations where the pod has none of that key.
func hostAdmission(t *testing.T, gvk schema.GroupVersionKind, raw []byte) []byte {
	t.Helper()
	if gvk != podGVK {
		return raw
	}
	var p corev1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	for _, d := range tolerationsOf[2:] {
		has := false
		for _, tol := range p.Spec.Tolerations {
			has = has || tol.Key == d.Key
		}
		if !has {
			p.Spec.Tolerations = append(p.Spec.Tolerations, d)
		}
	}
	out, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// store is what the host does to a written object: the storage model, then its admission.
func store(t *testing.T, gvk schema.GroupVersionKind, raw []byte) []byte {
	t.Helper()
	out, err := hoststore.Store(gvk, raw)
	if err != nil {
		t.Fatalf("store: %v\n%s", err, raw)
	}
	return hostAdmission(t, gvk, out)
}

// FuzzReadOfWhatTheHostStores: for an object shaped as users' (one key, one label, empty or
// short lists, the default tolerations or not) and a hook that can empty a map or a list,
// the read of what the host stores after the write (package hoststore's model and the host's
// DefaultTolerationSeconds) is the object the syncer sent as the host stores it, element for
// element: nothing lost, nothing twice. The model is held to a real apiserver by e2e's
// TestTheReadIsRightOnWhatARealAPIServerStores.
func FuzzReadOfWhatTheHostStores(f *testing.F) {
	f.Add(uint8(0), uint8(0b1111), uint8(1), uint8(1), uint8(0))
	f.Add(uint8(1), uint8(0), uint8(1), uint8(1), uint8(0))
	f.Add(uint8(2), uint8(0b0101), uint8(0), uint8(2), uint8(1))
	f.Add(uint8(3), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add(uint8(4), uint8(0), uint8(0), uint8(0), uint8(1))
	f.Add(uint8(4), uint8(0b1101), uint8(1), uint8(0), uint8(1))
	ring, err := undo.GenerateRing()
	if err != nil {
		f.Fatal(err)
	}
	regs := make([]*engine.Registry, len(fuzzConfigs))
	for i, y := range fuzzConfigs {
		cfg, err := config.Parse([]byte(y))
		if err != nil {
			f.Fatal(err)
		}
		regs[i] = engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
		if err := cfg.Build(regs[i]); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, which, tolerations, labels, env, keys uint8) {
		i := int(which) % len(fuzzConfigs)
		gvk, sent := podGVK, fuzzPod(tolerations, labels, env)
		if i == len(fuzzConfigs)-1 {
			gvk, sent = secretGVK, fuzzSecret(keys)
		}
		reg := regs[i]
		res, err := reg.Mutate(t.Context(), gvk, hooks.CreatePhysical, sent)
		if err != nil {
			t.Fatal(err)
		}
		written, err := res.Object()
		if err != nil {
			t.Fatal(err)
		}
		res, err = reg.Mutate(t.Context(), gvk, hooks.GetPhysical, store(t, gvk, written))
		if err != nil {
			t.Fatal(err)
		}
		read, err := res.Object()
		if err != nil {
			t.Fatal(err)
		}
		got, err := hoststore.Store(gvk, read) // as the syncer decodes it
		if err != nil {
			t.Fatal(err)
		}
		want := store(t, gvk, sent)
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("config %d: the read of what the host stores is not what the syncer sent as stored:\nsent  %s\nwrote %s\nread  %s\nwant  %s", i, sent, written, got, want)
		}
	})
}

// fuzzPod is a tenant pod as vcluster sends it: tolerations from the bits of tolerations
// (bit i: tolerationsOf[i]; bits 4-5 repeat the first ones, as users' lists sometimes do),
// labels from labels (0: none, 1: app only, 2: app and tier), env vars (0 to 2).
func fuzzPod(tolerations, labels, env uint8) []byte {
	p := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	for b := range 6 {
		if tolerations&(1<<b) != 0 {
			p.Spec.Tolerations = append(p.Spec.Tolerations, tolerationsOf[b%len(tolerationsOf)])
		}
	}
	switch labels % 3 {
	case 1:
		p.Labels = map[string]string{"app": "web"}
	case 2:
		p.Labels = map[string]string{"app": "web", "tier": "front"}
	}
	if labels&4 != 0 {
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	}
	for e := range int(env % 3) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("V%d", e), Value: "x"})
	}
	out, _ := json.Marshal(&p)
	return out
}

// fuzzSecret is a Secret with the password only (keys even) or with a second key.
func fuzzSecret(keys uint8) []byte {
	s := corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Data:       map[string][]byte{"password": []byte("pw")},
	}
	if keys%2 == 1 {
		s.Data["user"] = []byte("u")
	}
	out, _ := json.Marshal(&s)
	return out
}
