package refsyncer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// vcluster's bookkeeping labels and annotations on host objects.
const (
	// MarkerLabel holds the vcluster name on every host object it manages.
	MarkerLabel = "vcluster.loft.sh/managed-by"
	// NamespaceLabel holds the virtual namespace of the object.
	NamespaceLabel = "vcluster.loft.sh/namespace"
	// NameAnnotation holds the virtual name of the object.
	NameAnnotation = "vcluster.loft.sh/object-name"
	// NamespaceAnnotation holds the virtual namespace of the object.
	NamespaceAnnotation = "vcluster.loft.sh/object-namespace"
	// UIDAnnotation holds the uid of the virtual object.
	UIDAnnotation = "vcluster.loft.sh/object-uid"
	// KindAnnotation holds the GVK of the object, as schema.GroupVersionKind.String() prints it.
	KindAnnotation = "vcluster.loft.sh/object-kind"
	// HostNameAnnotation holds the host name of the object.
	HostNameAnnotation = "vcluster.loft.sh/object-host-name"
	// HostNamespaceAnnotation holds the host namespace of the object.
	HostNamespaceAnnotation = "vcluster.loft.sh/object-host-namespace"
)

// DefaultInterval is the default Options.Interval.
const DefaultInterval = time.Second

// Options configures a Syncer.
type Options struct {
	// Name is the vcluster name: the suffix of host names and the value of MarkerLabel.
	// Required.
	Name string
	// HostNamespace is the one host namespace all objects go to. Required.
	HostNamespace string
	// Virtual and Host are the clients of the two clusters, normally hookclient.Wrap'ed with
	// hookclient.Virtual and hookclient.Physical. Required.
	Virtual, Host client.Client
	// Interval is the time between the starts of two passes. Default DefaultInterval (1 s).
	Interval time.Duration
	// LabelsUp copies labels of a host object that the syncer did not put there to its virtual
	// object, as vcluster >= 0.21 syncs labels host → virtual ("labels up <Kind>" writes).
	// Default false.
	LabelsUp bool
	// Log receives every write at V(1) and failed passes at V(0). Default logr.Discard().
	Log logr.Logger
}

// Syncer syncs pods, services and secrets between a virtual and a host cluster. Create it
// with New and run it with Run.
type Syncer struct {
	opts Options

	mu      sync.Mutex
	counts  map[string]int64
	lastErr error
}

// New returns a Syncer for opts. It fails when a required field is missing.
func New(opts Options) (*Syncer, error) {
	if opts.Name == "" || opts.HostNamespace == "" || opts.Virtual == nil || opts.Host == nil {
		return nil, errors.New("refsyncer: Name, HostNamespace, Virtual and Host are required")
	}
	opts.Interval = cmp.Or(max(opts.Interval, 0), DefaultInterval)
	return &Syncer{opts: opts, counts: map[string]int64{}}, nil
}

// HostName returns the host name of the virtual object namespace/name of vcluster vcluster:
// "<name>-x-<namespace>-x-<vcluster>", or, past 63 characters, its first 52 characters, "-"
// and 10 hex digits of its SHA-256.
func HostName(name, namespace, vcluster string) string {
	full := name + "-x-" + namespace + "-x-" + vcluster
	if len(full) <= 63 {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return strings.ReplaceAll(full[:52]+"-"+hex.EncodeToString(sum[:])[:10], ".-", "-")
}

// Run runs a pass at once and then every Interval until ctx ends, and returns nil then. A
// failed pass is logged and counted (see Count) and the next pass retries.
func (s *Syncer) Run(ctx context.Context) error {
	ticker := time.NewTicker(s.opts.Interval)
	defer ticker.Stop()
	for {
		if err := s.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Info("sync pass failed; retrying", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// SyncOnce makes one pass over pods, services and secrets and returns the errors of the pass,
// joined. Every failed operation is counted under "errors".
func (s *Syncer) SyncOnce(ctx context.Context) error {
	err := errors.Join(
		syncKind(ctx, s, podKind),
		syncKind(ctx, s, serviceKind),
		syncKind(ctx, s, secretKind),
	)
	s.mu.Lock()
	if err != nil {
		s.lastErr = err
	}
	s.counts["passes"]++
	s.mu.Unlock()
	return err
}

// Count returns how many times op happened: "create <Kind>", "update <Kind>", "delete
// <Kind>" and "status <Kind>" (a status update of the virtual object) for the writes that
// succeeded, "errors" for every failed operation and "passes" for every pass done (failed or
// not). A test waits for two more passes to know that a whole pass ran after a change.
func (s *Syncer) Count(op string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// LastError returns the error of the last failed pass, or nil.
func (s *Syncer) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// record counts op (or an error) and returns err wrapped with what failed.
func (s *Syncer) record(op, kind, name string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.counts["errors"]++
		return fmt.Errorf("%s %s %s: %w", op, kind, name, err)
	}
	s.counts[op+" "+kind]++
	s.opts.Log.V(1).Info(op, "kind", kind, "name", name)
	return nil
}

// kind is what syncKind needs to know about one kind of object. T is the pointer type
// (*corev1.Pod), L the list type (*corev1.PodList).
type kind[T client.Object, L client.ObjectList] struct {
	name    string
	newList func() L
	items   func(L) []T
	// skip reports whether a virtual object is not synced.
	skip func(v T) bool
	// toHost returns the host object to create for v, with meta as its metadata.
	toHost func(v T, meta metav1.ObjectMeta) T
	// update returns h updated from v (meta is the wanted metadata) and whether that differs
	// from h.
	update func(v, h T, meta metav1.ObjectMeta) (T, bool)
	// statusUp, when set, returns v with the status of h and whether that differs from v.
	statusUp func(v, h T) (T, bool)
}

// syncKind makes one pass over one kind.
func syncKind[T client.Object, L client.ObjectList](ctx context.Context, s *Syncer, k kind[T, L]) error {
	vl, hl := k.newList(), k.newList()
	if err := s.opts.Virtual.List(ctx, vl); err != nil {
		return s.record("list virtual", k.name, "", err)
	}
	if err := s.opts.Host.List(ctx, hl, client.InNamespace(s.opts.HostNamespace), client.MatchingLabels{MarkerLabel: s.opts.Name}); err != nil {
		return s.record("list host", k.name, "", err)
	}
	hosts := map[string]T{}
	for _, h := range k.items(hl) {
		hosts[h.GetName()] = h
	}
	var errs []error
	for _, v := range k.items(vl) {
		if k.skip(v) || v.GetDeletionTimestamp() != nil {
			continue
		}
		meta := s.hostMeta(v, k.name)
		h, ok := hosts[meta.Name]
		delete(hosts, meta.Name)
		if !ok {
			errs = append(errs, s.record("create", k.name, meta.Name, s.opts.Host.Create(ctx, k.toHost(v, meta))))
			continue
		}
		if upd, changed := k.update(v, h, meta); changed {
			errs = append(errs, s.record("update", k.name, meta.Name, s.opts.Host.Update(ctx, upd)))
		}
		if s.opts.LabelsUp {
			if vu, changed := labelsUp(v, h); changed {
				errs = append(errs, s.record("labels up", k.name, objectRef(v), s.opts.Virtual.Update(ctx, vu)))
				continue // v changed: the next pass sees it
			}
		}
		if k.statusUp != nil {
			if vu, changed := k.statusUp(v, h); changed {
				errs = append(errs, s.record("status", k.name, objectRef(v), s.opts.Virtual.Status().Update(ctx, vu)))
			}
		}
	}
	for _, h := range hosts {
		if !s.manages(h) {
			continue
		}
		uid := h.GetUID()
		err := s.opts.Host.Delete(ctx, h, client.Preconditions{UID: &uid})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		errs = append(errs, s.record("delete", k.name, h.GetName(), err))
	}
	return errors.Join(errs...)
}

// hostMeta returns the metadata of the host object of v: name, namespace, v's labels and
// annotations plus vcluster's bookkeeping.
func (s *Syncer) hostMeta(v client.Object, kind string) metav1.ObjectMeta {
	name := HostName(v.GetName(), v.GetNamespace(), s.opts.Name)
	labels := maps.Clone(v.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[MarkerLabel] = s.opts.Name
	labels[NamespaceLabel] = v.GetNamespace()
	annotations := maps.Clone(v.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[NameAnnotation] = v.GetName()
	annotations[NamespaceAnnotation] = v.GetNamespace()
	annotations[UIDAnnotation] = string(v.GetUID())
	annotations[KindAnnotation] = corev1.SchemeGroupVersion.WithKind(kind).String()
	annotations[HostNameAnnotation] = name
	annotations[HostNamespaceAnnotation] = s.opts.HostNamespace
	return metav1.ObjectMeta{Name: name, Namespace: s.opts.HostNamespace, Labels: labels, Annotations: annotations}
}

// manages reports whether h is a host object this syncer created: its marker label, and a name
// that matches its object-name and object-namespace annotations.
func (s *Syncer) manages(h client.Object) bool {
	a := h.GetAnnotations()
	return h.GetLabels()[MarkerLabel] == s.opts.Name && a[NameAnnotation] != "" &&
		h.GetName() == HostName(a[NameAnnotation], a[NamespaceAnnotation], s.opts.Name)
}

// labelsUp returns v with the labels of h that the syncer's bookkeeping did not add, and
// whether that changed v.
func labelsUp[T client.Object](v, h T) (T, bool) {
	var add map[string]string
	for k, val := range h.GetLabels() {
		if k == MarkerLabel || k == NamespaceLabel {
			continue
		}
		if cur, ok := v.GetLabels()[k]; !ok || cur != val {
			if add == nil {
				add = map[string]string{}
			}
			add[k] = val
		}
	}
	if add == nil {
		return v, false
	}
	vu, _ := v.DeepCopyObject().(T)
	labels := maps.Clone(vu.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, add)
	vu.SetLabels(labels)
	return vu, true
}

// sameMeta reports whether h's labels and annotations are those of meta.
func sameMeta(h client.Object, meta metav1.ObjectMeta) bool {
	return equality.Semantic.DeepEqual(h.GetLabels(), meta.Labels) &&
		equality.Semantic.DeepEqual(h.GetAnnotations(), meta.Annotations)
}

func objectRef(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }

var podKind = kind[*corev1.Pod, *corev1.PodList]{
	name:    "Pod",
	newList: func() *corev1.PodList { return &corev1.PodList{} },
	items: func(l *corev1.PodList) []*corev1.Pod {
		out := make([]*corev1.Pod, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out
	},
	skip: func(*corev1.Pod) bool { return false },
	toHost: func(v *corev1.Pod, meta metav1.ObjectMeta) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: meta, Spec: *v.Spec.DeepCopy()}
	},
	update: func(v, h *corev1.Pod, meta metav1.ObjectMeta) (*corev1.Pod, bool) {
		changed := !sameMeta(h, meta)
		upd := h.DeepCopy()
		upd.Labels, upd.Annotations = meta.Labels, meta.Annotations
		for i := range upd.Spec.Containers { // images are the mutable part of a pod's spec
			if i < len(v.Spec.Containers) && upd.Spec.Containers[i].Image != v.Spec.Containers[i].Image {
				upd.Spec.Containers[i].Image = v.Spec.Containers[i].Image
				changed = true
			}
		}
		return upd, changed
	},
	statusUp: func(v, h *corev1.Pod) (*corev1.Pod, bool) {
		if equality.Semantic.DeepEqual(v.Status, h.Status) {
			return v, false
		}
		vu := v.DeepCopy()
		vu.Status = *h.Status.DeepCopy()
		return vu, true
	},
}

var serviceKind = kind[*corev1.Service, *corev1.ServiceList]{
	name:    "Service",
	newList: func() *corev1.ServiceList { return &corev1.ServiceList{} },
	items: func(l *corev1.ServiceList) []*corev1.Service {
		out := make([]*corev1.Service, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out
	},
	skip: func(v *corev1.Service) bool { return v.Namespace == metav1.NamespaceDefault && v.Name == "kubernetes" },
	toHost: func(v *corev1.Service, meta metav1.ObjectMeta) *corev1.Service {
		return &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
			Type: v.Spec.Type, Ports: hostPorts(v), Selector: hostSelector(v),
		}}
	},
	update: func(v, h *corev1.Service, meta metav1.ObjectMeta) (*corev1.Service, bool) {
		upd := h.DeepCopy()
		upd.Labels, upd.Annotations = meta.Labels, meta.Annotations
		upd.Spec.Type, upd.Spec.Ports, upd.Spec.Selector = v.Spec.Type, hostPorts(v), hostSelector(v)
		return upd, !sameMeta(h, meta) || !equality.Semantic.DeepEqual(upd.Spec, h.Spec)
	},
}

// hostPorts returns the ports of v for the host: the same, without node ports (the host
// allocates its own).
func hostPorts(v *corev1.Service) []corev1.ServicePort {
	ports := make([]corev1.ServicePort, len(v.Spec.Ports))
	for i, p := range v.Spec.Ports {
		p.NodePort = 0
		ports[i] = p
	}
	return ports
}

// hostSelector returns v's selector for the host, limited to pods of v's virtual namespace
// (all virtual namespaces share one host namespace).
func hostSelector(v *corev1.Service) map[string]string {
	if len(v.Spec.Selector) == 0 {
		return nil
	}
	sel := maps.Clone(v.Spec.Selector)
	sel[NamespaceLabel] = v.Namespace
	return sel
}

var secretKind = kind[*corev1.Secret, *corev1.SecretList]{
	name:    "Secret",
	newList: func() *corev1.SecretList { return &corev1.SecretList{} },
	items: func(l *corev1.SecretList) []*corev1.Secret {
		out := make([]*corev1.Secret, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out
	},
	skip: func(v *corev1.Secret) bool { return v.Type == corev1.SecretTypeServiceAccountToken },
	toHost: func(v *corev1.Secret, meta metav1.ObjectMeta) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: meta, Type: v.Type, Data: maps.Clone(v.Data)}
	},
	update: func(v, h *corev1.Secret, meta metav1.ObjectMeta) (*corev1.Secret, bool) {
		upd := h.DeepCopy()
		upd.Labels, upd.Annotations, upd.Data = meta.Labels, meta.Annotations, maps.Clone(v.Data)
		return upd, !sameMeta(h, meta) || !equality.Semantic.DeepEqual(upd.Data, h.Data)
	},
}
