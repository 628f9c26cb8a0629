package hookclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
)

// capsRetryInterval is how often, at most, capabilities are fetched again after a failed fetch.
const capsRetryInterval = time.Second

// capsState is one fetched set of capabilities: the (GVK, hook type) pairs that have hooks.
type capsState struct {
	keys    map[engine.Key]bool
	fetched time.Time
}

// wireCapabilities is the JSON of GET /capabilities (engine.Capabilities) read leniently: hook
// types this client does not know, from a newer sidecar, are skipped instead of failing.
type wireCapabilities struct {
	Resources []struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		HookTypes  []struct {
			Type string `json:"type"`
		} `json:"hookTypes"`
	} `json:"resources"`
}

// Refresh fetches GET /capabilities now and uses the result from then on. Calling it at start
// is optional (the first hook call fetches them otherwise) but surfaces a missing sidecar or
// CA early. Errors wrap ErrUnavailable; the capabilities in use, if any, are kept.
func (c *Client) Refresh(ctx context.Context) error {
	c.capsMu.Lock()
	defer c.capsMu.Unlock()
	return c.refreshLocked(ctx)
}

func (c *Client) refreshLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	keys, err := c.fetchCapabilities(ctx)
	if err != nil {
		c.capsFailed.Store(c.opts.Clock.Now().UnixNano())
		return fmt.Errorf("%w: GET /capabilities: %w", ErrUnavailable, err)
	}
	c.capsFailed.Store(0)
	c.caps.Store(&capsState{keys: keys, fetched: c.opts.Clock.Now()})
	c.opts.Log.V(1).Info("fetched sidecar capabilities", "chains", len(keys))
	return nil
}

func (c *Client) fetchCapabilities(ctx context.Context) (map[engine.Key]bool, error) {
	status, body, err := c.send(ctx, http.MethodGet, c.opts.URL+"/capabilities", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", status, snippet(body))
	}
	var caps wireCapabilities
	if err := json.Unmarshal(body, &caps); err != nil {
		return nil, fmt.Errorf("decode capabilities: %w", err)
	}
	keys := map[engine.Key]bool{}
	for _, r := range caps.Resources {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("capabilities: apiVersion %q: %w", r.APIVersion, err)
		}
		for _, ht := range r.HookTypes {
			if t := hooks.HookType(ht.Type); t.Valid() {
				keys[engine.Key{GVK: gv.WithKind(r.Kind), Type: t}] = true
			}
		}
	}
	return keys, nil
}

// currentCapabilities returns the capabilities to decide with, fetching them first when they
// are older than CapabilitiesInterval (or missing) and no fetch failed in the last second. A
// caller that finds another fetch under way does not wait for it. It returns nil while no
// fetch has ever succeeded.
func (c *Client) currentCapabilities(ctx context.Context) *capsState {
	st := c.caps.Load()
	now := c.opts.Clock.Now()
	if st != nil && now.Sub(st.fetched) < c.opts.CapabilitiesInterval {
		return st
	}
	if failed := c.capsFailed.Load(); failed != 0 && now.Sub(time.Unix(0, failed)) < min(capsRetryInterval, c.opts.CapabilitiesInterval) {
		return st
	}
	if !c.capsMu.TryLock() {
		return st
	}
	defer c.capsMu.Unlock()
	if st2 := c.caps.Load(); st2 != st { // another caller fetched them meanwhile
		return st2
	}
	if err := c.refreshLocked(ctx); err != nil {
		c.opts.Log.V(1).Info("cannot fetch sidecar capabilities; using the last ones", "error", err.Error(), "known", st != nil)
	}
	return c.caps.Load()
}

// Hooked reports whether the sidecar has hooks for (gvk, t), from its capabilities (fetched
// when due, see Options.CapabilitiesInterval). For a list kind (v1 PodList) it reports whether
// its item kind has hooks. While the capabilities are unknown (never fetched) it returns true,
// so that the call goes to the sidecar and the failure policy decides.
func (c *Client) Hooked(ctx context.Context, gvk schema.GroupVersionKind, t hooks.HookType) bool {
	st := c.currentCapabilities(ctx)
	if st == nil {
		return true
	}
	if st.keys[engine.Key{GVK: gvk, Type: t}] {
		return true
	}
	item, ok := engine.ListItemGVK(gvk)
	return ok && st.keys[engine.Key{GVK: item, Type: t}]
}
