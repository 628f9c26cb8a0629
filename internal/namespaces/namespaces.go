// Package namespaces gives hooks the Namespace an object came from: its name (Name, the one
// rule for which namespace that is) and the Namespace object, from a Source the transport puts
// in the request's context (WithSource, From). Under vcluster the Source is a watch cache of the
// virtual cluster's Namespaces (Cache), started on the kubeconfig vcluster's Initialize hands
// the plugin; tests and offline runs use Static.
package namespaces

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/synchook/synchook/hooks"
)

// ObjectNamespaceAnnotation is the annotation vcluster sets on every host object it syncs: the
// namespace of the virtual object, written from the virtual object's own namespace on every
// sync (pkg/util/translate, addHostAnnotations), whatever the tenant set. The pod annotation
// vcluster.loft.sh/namespace is not it: vcluster copies a tenant's value of that one.
const ObjectNamespaceAnnotation = "vcluster.loft.sh/object-namespace"

// Lookup returns Namespaces by name.
type Lookup interface {
	// Get returns the Namespace named name (labels and annotations at least); (nil, nil) when
	// there is none; an error when it cannot tell by ctx's end (a cache not synced yet).
	Get(ctx context.Context, name string) (*corev1.Namespace, error)
}

// Source is where a request's hooks find namespaces: a Lookup, and whether it holds the virtual
// cluster's Namespaces while the objects of physical hook types are host objects (vcluster),
// so that their namespace is named by ObjectNamespaceAnnotation.
type Source struct {
	Lookup Lookup
	// Virtual: the Lookup holds the virtual cluster's Namespaces (vcluster's plugin).
	Virtual bool
}

type sourceKey struct{}

// WithSource returns ctx carrying s, for the hooks the request runs.
func WithSource(ctx context.Context, s Source) context.Context {
	return context.WithValue(ctx, sourceKey{}, s)
}

// From returns the Source of ctx; false when the transport gave none.
func From(ctx context.Context) (Source, bool) {
	s, ok := ctx.Value(sourceKey{}).(Source)
	return s, ok && s.Lookup != nil
}

// ErrNoSource is the error of a hook that needs a namespace in a request without a Source.
var ErrNoSource = errors.New("no namespace source: this transport does not look namespaces up (vcluster's plugin v2 and serve do)")

// Name returns the name of the namespace the object of hook type t came from, whose own
// namespace is namespace and annotations annotations, as s sees it: for a physical type under a
// virtual Source, ObjectNamespaceAnnotation ("" when absent: not an object vcluster synced);
// else the object's own namespace. A virtual object's annotation is never read (a tenant can
// set it there).
func (s Source) Name(t hooks.HookType, namespace string, annotations map[string]string) string {
	if s.Virtual && physical(t) {
		return annotations[ObjectNamespaceAnnotation]
	}
	return namespace
}

func physical(t hooks.HookType) bool {
	switch t {
	case hooks.CreatePhysical, hooks.UpdatePhysical, hooks.DeletePhysical, hooks.GetPhysical:
		return true
	}
	return false
}

// Static is a Lookup of a fixed set of Namespaces by name.
type Static map[string]*corev1.Namespace

// Get implements Lookup.
func (s Static) Get(_ context.Context, name string) (*corev1.Namespace, error) { return s[name], nil }

// Cache is a Lookup over a watch of one cluster's Namespaces, started lazily: Configure gives it
// the cluster, the first Get starts the watch and waits (until its ctx ends) for the first list.
// It keeps of each Namespace its name, labels and annotations only. The zero Cache is not
// usable: create it with NewCache.
type Cache struct {
	mu       sync.Mutex
	config   *rest.Config
	informer cache.SharedIndexInformer
	stop     chan struct{}
	stopped  bool
}

// NewCache returns an unconfigured Cache.
func NewCache() *Cache { return &Cache{stop: make(chan struct{})} }

// Configure sets the cluster whose Namespaces c watches. Only the first call counts.
func (c *Cache) Configure(config *rest.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.config == nil {
		c.config = rest.CopyConfig(config)
	}
}

// Close stops the watch; Get fails from then on.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.stopped = true
		close(c.stop)
	}
}

// errNotConfigured is Get's error before Configure.
var errNotConfigured = errors.New("the namespace cache has no cluster: under vcluster Initialize gives it; serve uses the pod's service account or KUBECONFIG")

// start returns the informer, started on the first call.
func (c *Cache) start() (cache.SharedIndexInformer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.informer != nil {
		return c.informer, nil
	}
	if c.config == nil {
		return nil, errNotConfigured
	}
	cs, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		return nil, fmt.Errorf("namespace cache: %w", err)
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().Namespaces().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Namespaces().Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Namespace{}, 0, cache.Indexers{})
	if err := inf.SetTransform(keepMetadata); err != nil {
		return nil, fmt.Errorf("namespace cache: %w", err)
	}
	go inf.Run(c.stop)
	c.informer = inf
	return inf, nil
}

// keepMetadata is the cache's transform: a Namespace's name, uid, labels and annotations.
func keepMetadata(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion,
		Labels: maps.Clone(ns.Labels), Annotations: maps.Clone(ns.Annotations),
	}}, nil
}

// Get implements Lookup. Before the first list it waits for it until ctx ends, then fails
// (the request fails, and vcluster syncs the object again later).
func (c *Cache) Get(ctx context.Context, name string) (*corev1.Namespace, error) {
	inf, err := c.start()
	if err != nil {
		return nil, err
	}
	if !inf.HasSynced() && !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the namespace cache has not listed the cluster's Namespaces yet: %w", context.Cause(ctx))
	}
	obj, found, err := inf.GetStore().GetByKey(name)
	if err != nil || !found {
		return nil, err
	}
	ns, _ := obj.(*corev1.Namespace)
	return ns, nil
}
