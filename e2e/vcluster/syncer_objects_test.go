package vcluster

// Objects, lookups, waits and watches of syncer_test.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Kinds the syncer tests look at.
const (
	kindPod     = "Pod"
	kindService = "Service"
	kindSecret  = "Secret"
)

// tenantPod is a pod as a tenant writes it: one container, its env from secret (when set),
// no service account token (envtest runs no token controller).
func tenantPod(name, secret string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
	}
	if secret != "" {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "password"},
		}}}
	}
	return p
}

func tenantService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS, Labels: map[string]string{"app": name}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

func tenantSecret(name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("s3cr3t\x00\xff\n")},
	}
}

// object is what the tests read of any kind.
type object interface {
	metav1.Object
	runtime.Object
}

// hostObject returns the host twin of the virtual object tenantNS/name of kind, found by the
// annotations vcluster puts on it (object-name, object-namespace); nil when there is none.
func hostObject(ctx context.Context, cs kubernetes.Interface, kind, name string) (object, error) {
	objs, err := listObjects(ctx, cs, kind, hostNamespace)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		a := o.GetAnnotations()
		if a[objectNameAnnotation] == name && a[objectNamespaceAnnotation] == tenantNS {
			return o, nil
		}
	}
	return nil, nil
}

// virtualObject returns tenantNS/name of kind in the virtual cluster; nil when there is none.
func virtualObject(ctx context.Context, cs kubernetes.Interface, kind, name string) (object, error) {
	objs, err := listObjects(ctx, cs, kind, tenantNS)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetName() == name {
			return o, nil
		}
	}
	return nil, nil
}

func listObjects(ctx context.Context, cs kubernetes.Interface, kind, ns string) ([]object, error) {
	var out []object
	switch kind {
	case kindPod:
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case kindService:
		l, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case kindSecret:
		l, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unknown kind %s", kind)
	}
	return out, nil
}

// waitFor polls cond (every 100 ms, up to timeout) until it reports done; on timeout it fails
// tb with what and the last state cond described.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, state string, err error)) {
	tb.Helper()
	var last string
	err := wait.PollUntilContextTimeout(tb.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		done, state, err := cond(ctx)
		last = state
		return done, err
	})
	if err != nil {
		tb.Fatalf("%s: %v; last state: %s", what, err, last)
	}
}

// waitHost waits until the host twin of tenantNS/name exists and ok(it) is empty, and
// returns it; ok returns what is still missing.
func waitHost(tb testing.TB, cl *clusters, kind, name string, ok func(o object) string) object {
	tb.Helper()
	return waitObject(tb, fmt.Sprintf("host %s for virtual %s/%s", kind, tenantNS, name), "not on the host",
		func(ctx context.Context) (object, error) { return hostObject(ctx, cl.host.cs, kind, name) }, ok)
}

// waitVirtual is waitHost for the virtual object.
func waitVirtual(tb testing.TB, cl *clusters, kind, name string, ok func(o object) string) object {
	tb.Helper()
	return waitObject(tb, fmt.Sprintf("virtual %s %s/%s", kind, tenantNS, name), "not in the virtual cluster",
		func(ctx context.Context) (object, error) { return virtualObject(ctx, cl.virtual.cs, kind, name) }, ok)
}

// waitObject waits until get finds the object (absent: it says missing) and ok(it) is empty.
func waitObject(tb testing.TB, what, missing string, get func(context.Context) (object, error), ok func(o object) string) object {
	tb.Helper()
	var got object
	waitFor(tb, time.Minute, what, func(ctx context.Context) (bool, string, error) {
		o, err := get(ctx)
		if err != nil || o == nil {
			return false, missing, err
		}
		got = o
		if ok == nil {
			return true, "", nil
		}
		if miss := ok(o); miss != "" {
			return false, miss + "; object: " + brief(o), nil
		}
		return true, "", nil
	})
	return got
}

// brief is an object's metadata labels and annotations (and a pod's scheduling fields), for
// messages. Secret data is never printed.
func brief(o object) string {
	m := map[string]any{"name": o.GetName(), "labels": o.GetLabels(), "annotations": o.GetAnnotations(), "resourceVersion": o.GetResourceVersion()}
	if p, ok := o.(*corev1.Pod); ok {
		m["tolerations"] = p.Spec.Tolerations
		m["nodeSelector"] = p.Spec.NodeSelector
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// hookTraces returns what of the hooks' additions o shows: labels and annotations with the
// given keys, and (pods) the policy's toleration and nodeSelector.
func hookTraces(o object, labels, annotations []string) []string {
	var out []string
	for _, k := range labels {
		if v, ok := o.GetLabels()[k]; ok {
			out = append(out, fmt.Sprintf("label %s=%s", k, v))
		}
	}
	for _, k := range annotations {
		if v, ok := o.GetAnnotations()[k]; ok {
			out = append(out, fmt.Sprintf("annotation %s=%.80s", k, v))
		}
	}
	if p, ok := o.(*corev1.Pod); ok {
		if hasPolicyToleration(p) {
			out = append(out, "the policy's toleration")
		}
		if _, ok := p.Spec.NodeSelector[policyNodeSelectorKey]; ok {
			out = append(out, "the policy's nodeSelector")
		}
	}
	return out
}

// eventRecorder watches pods, services and secrets in one namespace of one cluster and keeps
// every event, from the moment it was started.
type eventRecorder struct {
	cluster string
	mu      sync.Mutex
	events  []recordedEvent
	errs    []error
}

type recordedEvent struct {
	at   time.Time
	typ  watch.EventType
	kind string
	obj  object
}

// recordEvents starts watches on pods, services and secrets of ns in c at their current
// resource version and records until tb ends. It returns once the watches are established.
func recordEvents(tb testing.TB, c *cluster, ns string) *eventRecorder {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &eventRecorder{cluster: c.name}
	var wg sync.WaitGroup
	for _, kind := range []string{kindPod, kindService, kindSecret} {
		w, err := startWatch(ctx, c.cs, kind, ns)
		if err != nil {
			cancel()
			tb.Fatalf("watch %ss in the %s cluster: %v", kind, c.name, err)
		}
		wg.Go(func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					r.mu.Lock()
					r.errs = append(r.errs, fmt.Errorf("%s watch: %v", kind, ev.Object))
					r.mu.Unlock()
					return
				}
				o, ok := ev.Object.(object)
				if !ok {
					continue
				}
				r.mu.Lock()
				r.events = append(r.events, recordedEvent{at: time.Now(), typ: ev.Type, kind: kind, obj: o})
				r.mu.Unlock()
			}
		})
	}
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return r
}

func startWatch(ctx context.Context, cs kubernetes.Interface, kind, ns string) (watch.Interface, error) {
	opts := metav1.ListOptions{}
	// start at the current state: list for the resource version, then watch from it
	switch kind {
	case kindPod:
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return nil, err
		}
		opts.ResourceVersion = l.ResourceVersion
		return cs.CoreV1().Pods(ns).Watch(ctx, opts)
	case kindService:
		l, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return nil, err
		}
		opts.ResourceVersion = l.ResourceVersion
		return cs.CoreV1().Services(ns).Watch(ctx, opts)
	case kindSecret:
		l, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return nil, err
		}
		opts.ResourceVersion = l.ResourceVersion
		return cs.CoreV1().Secrets(ns).Watch(ctx, opts)
	}
	return nil, fmt.Errorf("unknown kind %s", kind)
}

// since returns the events recorded at or after t that keep returns true for.
func (r *eventRecorder) since(t time.Time, keep func(recordedEvent) bool) ([]recordedEvent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedEvent
	for _, ev := range r.events {
		if !ev.at.Before(t) && (keep == nil || keep(ev)) {
			out = append(out, ev)
		}
	}
	if len(r.errs) > 0 {
		return out, fmt.Errorf("%v", r.errs)
	}
	return out, nil
}

// describeUpdates lists the MODIFIED events among evs, each with the labels and annotations
// that changed from the object's previous event (and whether spec or status did).
func describeUpdates(evs []recordedEvent, all []recordedEvent) string {
	prev := map[string]object{}
	var b strings.Builder
	for _, ev := range all {
		key := ev.kind + "/" + ev.obj.GetName()
		if ev.typ == watch.Modified && slices.ContainsFunc(evs, func(e recordedEvent) bool { return e.obj == ev.obj }) {
			fmt.Fprintf(&b, "\n  %s %s rv %s: %s", ev.at.Format("15:04:05.000"), key, ev.obj.GetResourceVersion(), changes(prev[key], ev.obj))
		}
		prev[key] = ev.obj
	}
	return b.String()
}

// mapChanges lists what differs from a to b, two labels or annotations maps: "+what k=v",
// "~what k: old -> new", "-what k" (values cut at 60 characters).
func mapChanges(what string, a, b map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if v, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("+%s %s=%.60s", what, k, b[k]))
		} else if v != b[k] {
			out = append(out, fmt.Sprintf("~%s %s: %.60s -> %.60s", what, k, v, b[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if _, ok := b[k]; !ok {
			out = append(out, fmt.Sprintf("-%s %s", what, k))
		}
	}
	return out
}

// changes says what differs between two versions of an object's metadata (and a pod's spec
// and status).
func changes(before, after object) string {
	if before == nil {
		return "(no earlier event)"
	}
	var out []string
	diff := func(what string, a, b map[string]string) { out = append(out, mapChanges(what, a, b)...) }
	diff("label", before.GetLabels(), after.GetLabels())
	diff("annotation", before.GetAnnotations(), after.GetAnnotations())
	if pb, ok := before.(*corev1.Pod); ok {
		pa := after.(*corev1.Pod)
		sb, _ := json.Marshal(pb.Spec)
		sa, _ := json.Marshal(pa.Spec)
		if string(sb) != string(sa) {
			out = append(out, "spec changed")
		}
		tb, _ := json.Marshal(pb.Status)
		ta, _ := json.Marshal(pa.Status)
		if string(tb) != string(ta) {
			out = append(out, "status changed")
		}
	}
	if len(out) == 0 {
		return "no label/annotation/spec/status change"
	}
	return strings.Join(out, ", ")
}
