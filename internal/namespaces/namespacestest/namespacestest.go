// Package namespacestest gives tests a namespaces.Cache over a cluster they drive: the first
// list holds what Options.Listed holds, the watch delivers what Deliver sends, the direct read
// answers what Options.Read says, and WaitingFor tells when a Get waits for a namespace the
// cache does not hold — so that a test delivers it while a request waits, without sleeping.
package namespacestest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/synchook/synchook/internal/namespaces"
)

// Options are a Cluster's.
type Options struct {
	// Listed are the Namespaces of the watch's first list.
	Listed []*corev1.Namespace
	// Read is the Cache's direct read of one Namespace (namespaces.Client.Read). Default
	// Unavailable: only the watch can answer.
	Read func(ctx context.Context, name string) (*corev1.Namespace, error)
}

// ErrUnavailable is Unavailable's error.
var ErrUnavailable = errors.New("namespacestest: the cluster does not answer direct reads")

// Unavailable is a direct read that fails at once (not a NotFound): the Cache waits for the watch.
func Unavailable(context.Context, string) (*corev1.Namespace, error) { return nil, ErrUnavailable }

// Hang is a direct read that answers only when its ctx ends (an apiserver that does not answer).
func Hang(ctx context.Context, _ string) (*corev1.Namespace, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// NotFound is a direct read that says the namespace does not exist.
func NotFound(_ context.Context, name string) (*corev1.Namespace, error) {
	return nil, fmt.Errorf("%w: the test cluster has no %q", namespaces.ErrNotFound, name)
}

// Cluster is a namespaces.Cache over a test's watch.
type Cluster struct {
	Cache *namespaces.Cache

	waiting  chan string
	watching chan struct{} // closed at the informer's first watch
	once     sync.Once
	mu       sync.Mutex
	watcher  *watch.FakeWatcher
}

// New returns a Cluster, its Cache closed at the end of t.
func New(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Read == nil {
		o.Read = Unavailable
	}
	c := &Cluster{waiting: make(chan string, 100), watching: make(chan struct{})}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			l := &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
			for _, ns := range o.Listed {
				l.Items = append(l.Items, *ns.DeepCopy())
			}
			return l, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFake()
			c.mu.Lock()
			c.watcher = w
			c.mu.Unlock()
			c.once.Do(func() { close(c.watching) })
			return w, nil
		},
	}
	c.Cache = namespaces.NewCacheFor(namespaces.Client{
		// A plain list and watch: the reflector's watch-list needs a bookmark this watch never sends.
		ListWatch: cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{}),
		Read:      o.Read,
		Waiting:   func(name string) { c.waiting <- name },
	})
	t.Cleanup(c.Cache.Close)
	return c
}

type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// guard bounds the test's own waits, so that a broken Cache fails the test instead of hanging it.
const guard = time.Minute

// WaitingFor returns once a Get of c's Cache waits for the namespace name (the next Get that
// waits must be for name). It fails t when res, the result of the request under test, comes
// first (the request did not wait), or when nothing happens within a minute.
func WaitingFor[T any](t testing.TB, c *Cluster, name string, res <-chan T) {
	t.Helper()
	select {
	case got := <-c.waiting:
		if got != name {
			t.Fatalf("a Get waits for namespace %q, want %q", got, name)
		}
	case r := <-res:
		t.Fatalf("the request ended without waiting for namespace %q: %+v", name, r)
	case <-time.After(guard):
		t.Fatalf("no Get waited for namespace %q", name)
	}
}

// Deliver sends ns on the Cache's watch, as the apiserver does when the namespace is created,
// once the Cache watches; it returns when the Cache has taken the event off the watch.
func (c *Cluster) Deliver(t testing.TB, ns *corev1.Namespace) {
	t.Helper()
	select {
	case <-c.watching:
	case <-time.After(guard):
		t.Fatal("the namespace cache never started its watch")
	}
	c.mu.Lock()
	w := c.watcher
	c.mu.Unlock()
	sent := make(chan struct{})
	go func() {
		w.Add(ns.DeepCopy())
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(guard):
		t.Fatalf("the namespace cache never took namespace %q off its watch", ns.Name)
	}
}

// Waits returns the names the Gets since the last call waited for, without waiting.
func (c *Cluster) Waits() []string {
	var out []string
	for {
		select {
		case name := <-c.waiting:
			out = append(out, name)
		default:
			return out
		}
	}
}
