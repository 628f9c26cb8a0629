package hookclient

import (
	"encoding/json"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/metamap"
)

// applyToMetadata applies a JSON Patch straight to the labels and annotations of obj, the
// typical hook's whole change, and reports whether it could. It can when every operation is
// add, replace or remove of /metadata/labels or /metadata/annotations, or of one entry of
// them, with string values, and when every target exists as RFC 6902 requires in the JSON
// encoding of obj (where an empty map is absent: omitempty). The result is then what encoding
// obj, applying the patch and decoding would give for those two maps, and every other field of
// obj is left exactly as it was, without the JSON round trip of the whole object.
//
// When it cannot, obj is untouched and the caller applies the patch to the JSON (patch.Apply):
// nothing is ever half-applied.
func applyToMetadata(obj metav1.Object, ops []itemOperation) bool {
	change, ok := metadataChange(obj, ops)
	if ok {
		change.apply(obj)
	}
	return ok
}

// metaChange is a change of the labels and annotations of an object, made by apply: the maps
// set says are replaced by the new maps in maps (indexed by metamap.Map).
type metaChange struct {
	maps [2]map[string]string
	set  [2]bool
}

// apply sets the changed maps on obj.
func (c metaChange) apply(obj metav1.Object) {
	for _, m := range []metamap.Map{metamap.Labels, metamap.Annotations} {
		if c.set[m] {
			m.Set(obj, c.maps[m])
		}
	}
}

// metadataChange returns what applyToMetadata would do to obj, without touching obj (its maps
// are copied before they change); ok is false when applyToMetadata could not.
func metadataChange(obj metav1.Object, ops []itemOperation) (metaChange, bool) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return metaChange{}, false // its maps may hold what GetLabels drops; the JSON path keeps it
	}
	targets := [2]map[string]string{metamap.Labels.Get(obj), metamap.Annotations.Get(obj)}
	cloned := [2]bool{}
	for _, op := range ops {
		which, key, whole, ok := metamap.Target(op.Path)
		if !ok || op.From != "" {
			return metaChange{}, false
		}
		m := targets[which]
		present := len(m) > 0
		if whole {
			switch {
			case op.Op == "remove" && present:
				targets[which] = nil
			case op.Op == "add" || op.Op == "replace" && present:
				var v map[string]string
				if !isObject(op.Value) || json.Unmarshal(op.Value, &v) != nil {
					return metaChange{}, false
				}
				targets[which] = v
			default:
				return metaChange{}, false
			}
			cloned[which] = true // a map of its own now
			continue
		}
		_, has := m[key]
		var value string
		switch {
		case op.Op == "remove" && has:
		case (op.Op == "add" && present || op.Op == "replace" && has) && isString(op.Value):
			if value, ok = jsonscan.String(op.Value); !ok {
				return metaChange{}, false
			}
		default:
			return metaChange{}, false
		}
		if !cloned[which] {
			m = cloneMap(m)
			targets[which], cloned[which] = m, true
		}
		if op.Op == "remove" {
			delete(m, key)
		} else {
			m[key] = value
		}
	}
	return metaChange{maps: targets, set: cloned}, true
}

func isString(v json.RawMessage) bool { return len(v) > 0 && v[0] == '"' }
func isObject(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}
