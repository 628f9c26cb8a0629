package engine

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/jsonscan"
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

func (d *loopDetector) observe(reg *Registry, gvk schema.GroupVersionKind, t hooks.HookType, meta, p []byte) {
	uid := metadataUID(meta)
	if uid == "" || onlyReserved(p, meta) {
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

// metadataUID returns the uid in the metadata object meta (nil: none), or "".
func metadataUID(meta []byte) string {
	m, _, ok := jsonscan.Find(meta, "uid")
	if !ok {
		return ""
	}
	var uid string
	_ = json.Unmarshal(m.Value, &uid)
	return uid
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

// onlyReserved reports whether the JSON Patch p changes nothing but synchook's reserved
// annotations: the removal of what a tenant wrote there and the undo that records it. That is
// no change of the hooks, so no loop of theirs either, however often the tenant's object comes.
// meta is the sent object's metadata (JSON): a removal of the whole annotations map (a typed
// chain's diff, where the tenant's reserved keys were all it held) is reserved only when the
// sent map held nothing else.
func onlyReserved(p, meta []byte) bool {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(p, &ops) != nil || len(ops) == 0 {
		return false
	}
	for _, op := range ops {
		switch {
		case isReservedPath(op.Path):
		case op.Path == "/metadata/annotations" && op.Op == "remove":
			var sent struct {
				Annotations json.RawMessage `json:"annotations"`
			}
			if json.Unmarshal(meta, &sent) != nil || !reservedKeysOnly(sent.Annotations) {
				return false
			}
		case op.Path == "/metadata/annotations": // a map made for the undo alone
			if !reservedKeysOnly(op.Value) {
				return false
			}
		case op.Path == "/metadata":
			var meta map[string]json.RawMessage
			if json.Unmarshal(op.Value, &meta) != nil || len(meta) != 1 || !reservedKeysOnly(meta["annotations"]) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func reservedKeysOnly(v json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return false
	}
	for k := range m {
		if k != undo.Annotation && k != ProvenanceAnnotation {
			return false
		}
	}
	return true
}
