package engine

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// maxLoopObjects bounds the objects the loop detector remembers; past it, it starts afresh.
const maxLoopObjects = 10000

type loopKey struct {
	uid string
	t   hooks.HookType
}

type loopState struct {
	sum      [sha256.Size]byte
	count    int
	first    time.Time
	reported bool
}

// loopDetector counts identical patches of Update chains per object (RunnerOptions.LoopThreshold).
type loopDetector struct {
	threshold int
	window    time.Duration
	observer  LoopObserver
	now       func() time.Time // time.Now unless a test sets it

	mu   sync.Mutex
	seen map[loopKey]*loopState
}

func (d *loopDetector) observe(reg *Registry, gvk schema.GroupVersionKind, t hooks.HookType, rec *intake.Record, p []byte) {
	uid := rec.UID()
	if uid == "" || undo.OnlyReserved(p, rec.Metadata) {
		return
	}
	now := time.Now()
	if d.now != nil {
		now = d.now()
	}
	sum := sha256.Sum256(p)
	key := loopKey{uid, t}
	d.mu.Lock()
	st := d.seen[key]
	if st == nil || st.sum != sum || now.Sub(st.first) > d.window {
		if len(d.seen) >= maxLoopObjects {
			clear(d.seen)
		}
		d.seen[key] = &loopState{sum: sum, count: 1, first: now}
		d.mu.Unlock()
		return
	}
	st.count++
	report := st.count > d.threshold && !st.reported
	if report {
		st.reported = true
	}
	d.mu.Unlock()
	if report {
		names := ""
		if c := reg.chains[Key{GVK: gvk, Type: t}]; c != nil {
			names = c.names()
		}
		d.observer.ObserveLoop(names, t, gvk, uid, firstPath(p))
	}
}

// firstPath returns the first path of the JSON Patch p other than the undo annotation's.
func firstPath(p []byte) string {
	var ops []patch.Operation
	if json.Unmarshal(p, &ops) != nil {
		return ""
	}
	if path := changedPath(ops); path != "" {
		return path
	}
	if len(ops) > 0 {
		return ops[0].Path
	}
	return ""
}
