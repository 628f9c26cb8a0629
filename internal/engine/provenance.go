package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// marksProvenance reports whether chain c sets undo.ProvenanceAnnotation: RegistryOptions.Provenance
// is on and c writes to the host (CreatePhysical, UpdatePhysical). Reads never mark their view,
// and writes to the virtual cluster never mark the tenant's object: vcluster copies what it
// reads to the other side, and the tenant must not see the platform's hook names there.
func (r *Registry) marksProvenance(c *chain) bool {
	_, stores := c.key.Type.ReadOf() // a Create or an Update
	return r.opts.Provenance && stores && c.key.Type.Side() == hooks.Physical
}

// provenanceMark returns "name@version#sha" for a hook that turned pre into post.
func provenanceMark(name, version string, pre, post []byte) string {
	p, _ := patch.Marshal(patch.DiffMarshaled(pre, post))
	sum := sha256.Sum256(p)
	return name + "@" + version + "#" + hex.EncodeToString(sum[:4])
}

// setProvenance puts marks into obj's undo.ProvenanceAnnotation.
func setProvenance(obj client.Object, marks []string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[undo.ProvenanceAnnotation] = strings.Join(marks, ",")
	obj.SetAnnotations(ann)
}
