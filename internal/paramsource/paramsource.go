// Package paramsource gives MutatingAdmissionPolicy bindings their params from the host
// cluster (policyreg.ParamSource): the objects of a paramKind in the namespaces a config entry
// names, read through watch caches started lazily per (paramKind, namespace), with
// kube-apiserver's behaviour (generic.CollectParams): a cache that has not listed yet is
// waited for a short, bounded time (SyncTimeout, 1 s) and then an error, a name the cache does
// not hold is read directly once (ReadTimeout, 1 s). Its errors are the binding's
// configuration errors, under the policy's failurePolicy (internal/policy wraps them with
// ErrParamConfig).
//
// Never the tenant's, one rule in one place (Scope.allows, FromVCluster): a param comes only
// from a namespace the entry names, never from the vcluster's own host namespace (where the
// objects vcluster syncs from the virtual cluster land), and never an object that carries a
// label or annotation under vcluster.loft.sh/ (vcluster's sync markers: managed-by,
// object-name, object-namespace, ...), whatever namespace it is in. The virtual cluster is
// never read. Outside that, an object does not exist for a policy: a paramRef by name finds
// none, a selector does not list it (parameterNotFoundAction decides).
package paramsource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/synchook/synchook/internal/policyreg"
)

// MarkerPrefix is the prefix of vcluster's sync markers: an object with a label or annotation
// key under it was written by vcluster (synced from a virtual cluster) and is never a param.
const MarkerPrefix = "vcluster.loft.sh/"

// Defaults of Options.
const (
	// DefaultSyncTimeout is how long a request waits for a cache's first list: kube-apiserver's
	// 1 s.
	DefaultSyncTimeout = time.Second
	// DefaultReadTimeout bounds the direct read of a name the cache does not hold:
	// kube-apiserver's 1 s.
	DefaultReadTimeout = time.Second
)

// ErrNoHost is the error of a request before the Host knows its cluster (Configure): serve
// outside a cluster, or a plugin v2 whose Initialize named no usable host kubeconfig.
var ErrNoHost = errors.New("no host cluster to read params from")

// ErrNotSynced is wrapped by the error of a request whose cache has not listed the host's
// objects within SyncTimeout (or the request's deadline): RBAC that forbids the list, an
// apiserver that does not answer.
var ErrNotSynced = errors.New("params not yet synced to use for admission")

// Options configures a Host. Zero fields take the defaults named on each.
type Options struct {
	// SyncTimeout bounds a request's wait for a cache's first list. Default DefaultSyncTimeout.
	SyncTimeout time.Duration
	// ReadTimeout bounds a direct read. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// Log receives one line per cache started and the watch errors, at V(1). Default
	// logr.Discard().
	Log logr.Logger
}

// Client is how a Host reaches the host cluster: Configure builds one from a rest.Config
// (a dynamic client and a lazily discovering REST mapper); tests give their own (NewFor).
type Client struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
}

// Host is the host cluster's param objects. Create it with New (Configure gives it the cluster
// later: serve from its client config, the vcluster plugin v2 at Initialize) or NewFor. It
// implements policyreg.HostParams; it is safe for concurrent use.
type Host struct {
	opts Options

	mu            sync.Mutex
	client        *Client
	hostNamespace string
	caches        map[cacheKey]*paramCache
	stop          chan struct{}
	stopped       bool
}

// cacheKey is one watch: a resource in one namespace ("" for a cluster-scoped one).
type cacheKey struct {
	gvr       schema.GroupVersionResource
	namespace string
}

// paramCache is one started informer and the last error its list or watch met.
type paramCache struct {
	inf     cache.SharedIndexInformer
	mu      sync.Mutex
	lastErr error
}

func (c *paramCache) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErr = err
}

func (c *paramCache) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// New returns a Host without a cluster: its sources fail with ErrNoHost until Configure.
func New(opts Options) *Host {
	opts.SyncTimeout = cmp.Or(max(opts.SyncTimeout, 0), DefaultSyncTimeout)
	opts.ReadTimeout = cmp.Or(max(opts.ReadTimeout, 0), DefaultReadTimeout)
	return &Host{opts: opts, caches: map[cacheKey]*paramCache{}, stop: make(chan struct{})}
}

// Configure gives h its cluster, from config, and the vcluster's host namespace (the one
// synced tenant objects land in; never read; "" when unknown). Only the first call that
// succeeds counts. Its error (a config a client cannot be built from) leaves h without a host.
func (h *Host) Configure(config *rest.Config, hostNamespace string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client != nil {
		return nil
	}
	rc := rest.CopyConfig(config)
	rc.Timeout = 0 // watches are long; reads are bounded by ReadTimeout
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return fmt.Errorf("params from the host cluster: %w", err)
	}
	dc, err := dynamic.NewForConfigAndClient(rc, hc)
	if err != nil {
		return fmt.Errorf("params from the host cluster: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(rc, hc)
	if err != nil {
		return fmt.Errorf("params from the host cluster: %w", err)
	}
	h.client, h.hostNamespace = &Client{Dynamic: dc, Mapper: mapper}, hostNamespace
	return nil
}

// HostNamespace returns the namespace Configure (or NewFor) named as the vcluster's own.
func (h *Host) HostNamespace() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hostNamespace
}

// Close stops every watch; the sources fail from then on.
func (h *Host) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.stopped = true
		close(h.stop)
	}
}

// In implements policyreg.HostParams: the params of the host namespaces named, by the rule of
// the package doc.
func (h *Host) In(namespaces []string) policyreg.ParamSource {
	s := &Scope{host: h, namespaces: slices.Clone(namespaces)}
	slices.Sort(s.namespaces)
	return s
}

// FromVCluster reports whether obj carries one of vcluster's sync markers (a label or
// annotation key under MarkerPrefix): an object vcluster synced from a virtual cluster, whose
// content the tenant chose.
func FromVCluster(obj metav1.Object) bool {
	for _, m := range []map[string]string{obj.GetLabels(), obj.GetAnnotations()} {
		for k := range m {
			if strings.HasPrefix(k, MarkerPrefix) {
				return true
			}
		}
	}
	return false
}

// Scope is the ParamSource of one config entry: the host's objects in its namespaces.
type Scope struct {
	host       *Host
	namespaces []string // sorted
}

// allows reports whether a param may come from namespace ("" : a cluster-scoped kind): one
// the entry names, never the vcluster's own host namespace.
func (s *Scope) allows(namespace string) bool {
	if namespace == "" {
		return true
	}
	if hn := s.host.HostNamespace(); hn != "" && namespace == hn {
		return false
	}
	_, found := slices.BinarySearch(s.namespaces, namespace)
	return found
}

// Namespaced implements policyreg.ParamSource, from the host's REST mapping.
func (s *Scope) Namespaced(_ context.Context, kind schema.GroupVersionKind) (bool, error) {
	c, err := s.host.clientOf()
	if err != nil {
		return false, err
	}
	m, err := c.Mapper.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		return false, fmt.Errorf("paramKind %s: %w", kind, err)
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// Get implements policyreg.ParamSource: from the cache once it has listed (waiting at most
// SyncTimeout for that), else, for a name it does not hold, one direct read (ReadTimeout).
func (s *Scope) Get(ctx context.Context, kind schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if !s.allows(namespace) {
		return nil, nil
	}
	pc, gvr, c, err := s.host.synced(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	if obj, found, _ := pc.inf.GetStore().GetByKey(key); found {
		if u, ok := obj.(*unstructured.Unstructured); ok && !FromVCluster(u) {
			return u, nil
		}
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.host.opts.ReadTimeout)
	defer cancel()
	var ri dynamic.ResourceInterface = c.Dynamic.Resource(gvr)
	if namespace != "" {
		ri = c.Dynamic.Resource(gvr).Namespace(namespace)
	}
	u, err := ri.Get(rctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s %q in namespace %q: %w", kind.Kind, name, namespace, err)
	case FromVCluster(u):
		return nil, nil
	}
	return u, nil
}

// List implements policyreg.ParamSource, from the cache once it has listed (waiting at most
// SyncTimeout for that).
func (s *Scope) List(ctx context.Context, kind schema.GroupVersionKind, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	if !s.allows(namespace) {
		return nil, nil
	}
	pc, _, _, err := s.host.synced(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, obj := range pc.inf.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || FromVCluster(u) || !selector.Matches(labels.Set(u.GetLabels())) {
			continue
		}
		if namespace != "" && u.GetNamespace() != namespace {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// clientOf returns h's client, or ErrNoHost.
func (h *Host) clientOf() (*Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, fmt.Errorf("%w: closed", ErrNoHost)
	}
	if h.client == nil {
		return nil, fmt.Errorf("%w: serve takes the cluster it runs in (its service account, or KUBECONFIG), the vcluster plugin v2 the host kubeconfig of Initialize", ErrNoHost)
	}
	return h.client, nil
}

// synced returns the cache of kind in namespace, started on the first call, once it has
// listed: it waits at most SyncTimeout (and until ctx ends) for that, else fails with
// ErrNotSynced and the last error the list met.
func (h *Host) synced(ctx context.Context, kind schema.GroupVersionKind, namespace string) (*paramCache, schema.GroupVersionResource, *Client, error) {
	c, err := h.clientOf()
	if err != nil {
		return nil, schema.GroupVersionResource{}, nil, err
	}
	m, err := c.Mapper.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		return nil, schema.GroupVersionResource{}, nil, fmt.Errorf("paramKind %s: %w", kind, err)
	}
	pc, err := h.cacheOf(c, cacheKey{gvr: m.Resource, namespace: namespace})
	if err != nil {
		return nil, m.Resource, nil, err
	}
	if pc.inf.HasSynced() {
		return pc, m.Resource, c, nil
	}
	wctx, cancel := context.WithTimeout(ctx, h.opts.SyncTimeout)
	defer cancel()
	if cache.WaitForCacheSync(wctx.Done(), pc.inf.HasSynced) {
		return pc, m.Resource, c, nil
	}
	where := ""
	if namespace != "" {
		where = fmt.Sprintf(" in namespace %q", namespace)
	}
	last := ""
	if err := pc.err(); err != nil {
		last = ": last list error: " + err.Error()
	}
	return nil, m.Resource, nil, fmt.Errorf("%w: paramKind %s%s has not been listed within %s%s", ErrNotSynced, kind, where, h.opts.SyncTimeout, last)
}

// cacheOf returns the cache of key, starting it on the first call.
func (h *Host) cacheOf(c *Client, key cacheKey) (*paramCache, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pc := h.caches[key]; pc != nil {
		return pc, nil
	}
	if h.stopped {
		return nil, fmt.Errorf("%w: closed", ErrNoHost)
	}
	var ri dynamic.ResourceInterface = c.Dynamic.Resource(key.gvr)
	if key.namespace != "" {
		ri = c.Dynamic.Resource(key.gvr).Namespace(key.namespace)
	}
	// The dynamic client says whether it streams the first list (a real one does; a fake
	// does not): the reflector asks it.
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, o)
		},
	}, c.Dynamic)
	pc := &paramCache{inf: cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})}
	if err := pc.inf.SetTransform(dropManagedFields); err != nil {
		return nil, err
	}
	log := h.opts.Log.WithValues("resource", key.gvr.String(), "namespace", key.namespace)
	if err := pc.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		pc.setErr(err)
		log.V(1).Info("params watch", "error", err.Error())
	}); err != nil {
		return nil, err
	}
	go pc.inf.Run(h.stop)
	h.caches[key] = pc
	log.V(1).Info("watching params")
	return pc, nil
}

// dropManagedFields is the caches' transform: an object without its managedFields (never a
// param's business, and most of a small object's size).
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}
