package namespaces

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestTheDirectReadIsAListOfTheOneName checks the Cache's read past its watch on a cluster's
// clientset: a list with the field selector metadata.name=NAME (RBAC list, as the watch needs:
// serve's documented ClusterRole has no get), once the watch's first list has not got the
// name; the Namespace when the read's list has it, ErrNotFound when it is empty. The fake
// apiserver answers the watch's own list empty and holds its watch open.
func TestTheDirectReadIsAListOfTheOneName(t *testing.T) {
	var (
		mu        sync.Mutex
		selectors []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces" || r.Method != http.MethodGet {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		q := r.URL.Query()
		if q.Get("watch") == "true" {
			if q.Get("sendInitialEvents") == "true" { // no watch-list here: the reflector lists
				http.Error(w, "no watch-list", http.StatusBadRequest)
				return
			}
			<-r.Context().Done()
			return
		}
		l := corev1.NamespaceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
		if sel := q.Get("fieldSelector"); sel != "" {
			mu.Lock()
			selectors = append(selectors, sel)
			mu.Unlock()
			if sel == "metadata.name=payments" {
				l.Items = []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "payments", Labels: map[string]string{"team": "payments"}}}}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(l)
	}))
	t.Cleanup(srv.Close)
	c := NewCache()
	c.Configure(&rest.Config{Host: srv.URL})
	t.Cleanup(c.Close) // before srv.Close: ends the held watch

	// A bound, so that a Cache that waits for its watch alone fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns, err := c.Get(ctx, "payments")
	if err != nil || ns.Labels["team"] != "payments" {
		t.Fatalf("payments: %v, %v", ns, err)
	}
	if _, err := c.Get(ctx, "gone"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("gone: error %v, want ErrNotFound", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(selectors) != 2 || selectors[0] != "metadata.name=payments" || selectors[1] != "metadata.name=gone" {
		t.Errorf("direct reads %q, want one list per name by metadata.name", selectors)
	}
}
