// Package namespaces gives hooks the Namespace an object came from: its name (Name, the one
// rule for which namespace that is) and the Namespace object, from a Source the transport puts
// in the request's context (WithSource, From). Under vcluster the Source is a watch cache of the
// virtual cluster's Namespaces (Cache), started on the kubeconfig vcluster's Initialize hands
// the plugin; in admission mode (serve) the same over the cluster serve serves; synchook test
// uses Static, the test file's namespaces. A hook that needs a named namespace never gets
// nothing for it: it gets the Namespace or an error naming it (Source.Namespace: ErrNotFound,
// ErrUnknown; ErrNoSource without a Source).
package namespaces

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	// Get returns the Namespace named name (labels and annotations at least), or an error:
	// one wrapping ErrNotFound when there is none, ErrUnknown when it cannot tell by ctx's end.
	// Source.Namespace takes (nil, nil) as ErrNotFound.
	Get(ctx context.Context, name string) (*corev1.Namespace, error)
}

// ErrNotFound is wrapped by the error of a lookup of a namespace that does not exist: the
// cluster says so (deleted, or never created), or a Static does not list it.
var ErrNotFound = errors.New("namespace not found")

// ErrUnknown is wrapped by the error of a lookup that could not tell by the request's deadline
// whether the namespace exists, nor read it: a cache that has not delivered it (or not listed
// the cluster yet) and a direct read that failed or did not answer in time.
var ErrUnknown = errors.New("namespace not known yet")

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
	if s.Virtual && t.Side() == hooks.Physical {
		return annotations[ObjectNamespaceAnnotation]
	}
	return namespace
}

// Namespace returns the name and the Namespace of the namespace the object of hook type t
// (own namespace namespace, annotations annotations) came from (Name), looked up in
// s.Lookup: ("", nil, nil) when the object names none (a cluster-scoped object; under vcluster
// a host object without ObjectNamespaceAnnotation, which vcluster did not sync). Else the
// Namespace, or an error naming the namespace (never its labels) that wraps ErrNotFound, or
// ErrUnknown, or whatever else the Lookup failed with: a hook never sees a named namespace as
// one without labels.
func (s Source) Namespace(ctx context.Context, t hooks.HookType, namespace string, annotations map[string]string) (string, *corev1.Namespace, error) {
	name := s.Name(t, namespace, annotations)
	if name == "" {
		return "", nil, nil
	}
	ns, err := s.Lookup.Get(ctx, name)
	if err == nil && ns == nil {
		err = ErrNotFound
	}
	if err != nil {
		return name, nil, fmt.Errorf("namespace %q: %w", name, err)
	}
	return name, ns, nil
}

// Static is a Lookup of a fixed set of Namespaces by name (synchook test's namespaces:); a name
// it does not hold is not found (ErrNotFound).
type Static map[string]*corev1.Namespace

// Get implements Lookup.
func (s Static) Get(_ context.Context, name string) (*corev1.Namespace, error) {
	if ns := s[name]; ns != nil {
		return ns, nil
	}
	return nil, ErrNotFound
}

// Client is how a Cache reaches a cluster's Namespaces. Configure's rest.Config gives one over a
// clientset (list and watch; a direct read is a list of the one name, so the RBAC of the watch
// covers it); tests give their own (NewCacheFor).
type Client struct {
	// ListWatch lists and watches the cluster's Namespaces, for the watch cache.
	ListWatch cache.ListerWatcher
	// Read reads the Namespace named name from the cluster, past the cache: a name the watch
	// has not delivered. It fails with an error wrapping ErrNotFound when there is none.
	Read func(ctx context.Context, name string) (*corev1.Namespace, error)
	// Waiting, when set, is called each time a Get starts waiting for a Namespace the cache
	// does not hold (tests: the signal to deliver it while the request waits).
	Waiting func(name string)
}

// Cache is a Lookup over a watch of one cluster's Namespaces, started lazily: Configure gives it
// the cluster, the first Get starts the watch. It keeps of each Namespace its name, labels and
// annotations only. A Get of a name the cache holds reads it there; of any other name (the
// first list has not arrived, or the namespace is newer than the watch has delivered: a tenant
// that creates a namespace and a pod at once) it waits until ctx ends for whichever comes
// first: the watch delivering it, or one direct read (Client.Read) answering it or saying it
// does not exist. The zero Cache is not usable: create it with NewCache or NewCacheFor.
type Cache struct {
	mu       sync.Mutex
	config   *rest.Config
	client   *Client // NewCacheFor's, else built from config by start
	informer cache.SharedIndexInformer
	stop     chan struct{}
	stopped  bool

	wmu     sync.Mutex
	waiters map[string]*waiter // by namespace name: the Gets waiting for the watch to deliver it
}

// waiter is the Gets waiting for one namespace name: learned is closed when the watch
// delivers it; n counts the Gets, the last one out removes it.
type waiter struct {
	learned chan struct{}
	n       int
}

// NewCache returns an unconfigured Cache.
func NewCache() *Cache {
	return &Cache{stop: make(chan struct{}), waiters: map[string]*waiter{}}
}

// NewCacheFor returns a Cache over client; Configure does nothing to it.
func NewCacheFor(client Client) *Cache {
	c := NewCache()
	c.client = &client
	return c
}

// Configure sets the cluster whose Namespaces c watches. Only the first call counts.
func (c *Cache) Configure(config *rest.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.config == nil {
		c.config = rest.CopyConfig(config)
	}
}

// Close stops the watch; Get fails from then on (a waiting Get too).
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

// errClosed is Get's error after Close.
var errClosed = errors.New("the namespace cache is closed")

// start returns the informer, started on the first call, and the client it runs on.
func (c *Cache) start() (cache.SharedIndexInformer, *Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.informer != nil {
		return c.informer, c.client, nil
	}
	if c.stopped {
		return nil, nil, errClosed
	}
	if c.client == nil {
		if c.config == nil {
			return nil, nil, errNotConfigured
		}
		cs, err := kubernetes.NewForConfig(c.config)
		if err != nil {
			return nil, nil, fmt.Errorf("namespace cache: %w", err)
		}
		c.client = clientsetClient(cs)
	}
	inf := cache.NewSharedIndexInformer(c.client.ListWatch, &corev1.Namespace{}, 0, cache.Indexers{})
	if err := inf.SetTransform(keepMetadata); err != nil {
		return nil, nil, fmt.Errorf("namespace cache: %w", err)
	}
	// Registered before Run: the handler sees every Namespace the store takes, after it took it.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.learned,
		UpdateFunc: func(_, obj any) { c.learned(obj) },
	}); err != nil {
		return nil, nil, fmt.Errorf("namespace cache: %w", err)
	}
	go inf.Run(c.stop)
	c.informer = inf
	return inf, c.client, nil
}

// clientsetClient returns the Client of a clientset: its list and watch of Namespaces, and as
// the direct read a list of the one name (field selector metadata.name), which needs no RBAC
// verb beyond the watch's list (a get would).
func clientsetClient(cs kubernetes.Interface) *Client {
	return &Client{
		ListWatch: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.CoreV1().Namespaces().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.CoreV1().Namespaces().Watch(ctx, o)
			},
		},
		Read: func(ctx context.Context, name string) (*corev1.Namespace, error) {
			l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				if l.Items[i].Name == name {
					return &l.Items[i], nil
				}
			}
			return nil, ErrNotFound
		},
	}
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

// learned is the informer's handler of a Namespace its store took: it wakes the Gets waiting
// for that name.
func (c *Cache) learned(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if w := c.waiters[ns.Name]; w != nil {
		close(w.learned)
		delete(c.waiters, ns.Name)
	}
}

// await registers a Get waiting for name; done unregisters it.
func (c *Cache) await(name string) *waiter {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	w := c.waiters[name]
	if w == nil {
		w = &waiter{learned: make(chan struct{})}
		c.waiters[name] = w
	}
	w.n++
	return w
}

func (c *Cache) done(name string, w *waiter) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if w.n--; w.n == 0 && c.waiters[name] == w {
		delete(c.waiters, name)
	}
}

// cached returns the Namespace named name from inf's store, nil when it has none.
func cached(inf cache.SharedIndexInformer, name string) *corev1.Namespace {
	obj, found, err := inf.GetStore().GetByKey(name)
	if err != nil || !found {
		return nil
	}
	ns, _ := obj.(*corev1.Namespace)
	return ns
}

// Get implements Lookup: from the cache when it holds name, else see Cache (miss). Its errors
// wrap ErrNotFound (the direct read says there is none, or the watch delivered the namespace
// and its deletion before this Get saw it) or ErrUnknown (ctx ended first).
func (c *Cache) Get(ctx context.Context, name string) (*corev1.Namespace, error) {
	inf, client, err := c.start()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnknown, err)
	}
	// What the store holds is what the apiserver listed or the watch delivered, synced or not
	// (client-go may run the handler that woke an earlier Get before it reports HasSynced):
	// only a miss needs the first list (miss).
	if ns := cached(inf, name); ns != nil {
		return ns, nil
	}
	return c.miss(ctx, inf, client, name)
}

// readResult is the answer of Client.Read.
type readResult struct {
	ns  *corev1.Namespace
	err error
}

// miss waits, until ctx ends, for name: first for the first list, if it has not arrived (the
// store may hold name then); then for the first of the watch delivering it, one direct read
// answering it, that read saying there is none. A read that fails otherwise leaves the watch to
// answer. The read waits for the first list so that a burst of requests at the start (the
// syncer's first pass) makes one list, not a read each.
func (c *Cache) miss(ctx context.Context, inf cache.SharedIndexInformer, client *Client, name string) (*corev1.Namespace, error) {
	w := c.await(name)
	defer c.done(name, w)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the read when the watch answers first
	var (
		read    chan readResult // the pending read's answer; nil when none is pending
		readErr error           // the read's error, once it failed
		readOut bool            // the read answered (or there is no Client.Read)
	)
	startRead := func() {
		if client.Read == nil {
			readOut = true
			return
		}
		read = make(chan readResult, 1)
		go func() {
			ns, err := client.Read(rctx, name)
			read <- readResult{ns, err}
		}()
	}
	synced := inf.HasSyncedChecker().Done()
	if inf.HasSynced() {
		synced = nil
		// Delivered between Get's look and await: the handler ran before the waiter existed.
		if ns := cached(inf, name); ns != nil {
			return ns, nil
		}
		startRead()
	}
	if client.Waiting != nil {
		client.Waiting(name)
	}
	learned := w.learned
	for {
		select {
		case <-synced:
			synced = nil
			if ns := cached(inf, name); ns != nil {
				return ns, nil
			}
			startRead()
		case <-learned:
			learned = nil
			if ns := cached(inf, name); ns != nil {
				return ns, nil
			}
			if readOut { // the watch delivered it and its deletion; the read failed
				return nil, fmt.Errorf("%w: deleted as soon as the watch delivered it", ErrNotFound)
			}
		case r := <-read:
			read, readOut = nil, true
			if r.err == nil && r.ns != nil {
				ns, _ := keepMetadata(r.ns)
				return ns.(*corev1.Namespace), nil
			}
			if r.err == nil || errors.Is(r.err, ErrNotFound) || apierrors.IsNotFound(r.err) {
				// The watch's answer, when it came at the same time, is the one the hot path
				// would have read.
				if ns := cached(inf, name); ns != nil {
					return ns, nil
				}
				if r.err == nil || errors.Is(r.err, ErrNotFound) {
					return nil, ErrNotFound
				}
				return nil, fmt.Errorf("%w: %w", ErrNotFound, r.err)
			}
			readErr = r.err // the watch may still deliver it
		case <-c.stop:
			return nil, fmt.Errorf("%w: %w", ErrUnknown, errClosed)
		case <-ctx.Done():
			if read != nil {
				select { // a read that failed just now says why
				case r := <-read:
					readErr = r.err
				default:
				}
			}
			return nil, unknown(synced == nil, read != nil || readErr != nil, readErr, context.Cause(ctx))
		}
	}
}

// unknown is miss's error when ctx ends: what did not answer, and why.
func unknown(listed, readStarted bool, readErr, cause error) error {
	switch {
	case !listed:
		return fmt.Errorf("%w: the namespace cache has not listed the cluster's Namespaces by the request's deadline: %w", ErrUnknown, cause)
	case readErr != nil:
		return fmt.Errorf("%w: the watch has not delivered it and a direct read failed (%w) by the request's deadline: %w", ErrUnknown, readErr, cause)
	case readStarted:
		return fmt.Errorf("%w: the watch has not delivered it and a direct read did not answer by the request's deadline: %w", ErrUnknown, cause)
	default:
		return fmt.Errorf("%w: the watch has not delivered it by the request's deadline: %w", ErrUnknown, cause)
	}
}
