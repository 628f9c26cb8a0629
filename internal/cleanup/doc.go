// Package cleanup is `synchook cleanup`: it takes synchook off the host objects of one vcluster
// namespace, for uninstalling synchook or after removing hooks. For every object of the given
// kinds that carries a synchook.io/* annotation, it writes back what undo.Rule.Cleanup
// makes of it — the undo applied as far as an update may change the object back, and no
// synchook.io/* annotation — by one Update with the object's resourceVersion (on a Conflict it
// reads the object again and recomputes, a few times). One write per object makes a run safe
// to interrupt and to repeat: a second run finds only the objects not yet cleaned.
//
// The vcluster syncer must be stopped first (the vcluster scaled to 0 replicas): a running
// syncer would read the cleaned objects through hooks that are gone and write them again.
//
// Only a sealed undo that opens with the Ring for this object is applied (undo.Rule.Cleanup):
// everything on a host object may be tenant text, since the syncer copies a tenant's annotations
// down, so a clear-text undo (undo.ReasonClearText) or one that does not open is listed and never
// applied. When the apiserver refuses the restored object as invalid (422 Invalid, 400
// BadRequest: a value of the undo it does not accept), Run reads the object again, removes only
// its synchook.io/* annotations, lists the object as refused and goes on: a run always finishes.
//
// Run reports on Options.Progress one line per object it cleans, the JSON Pointers it left as
// the hooks wrote them (undo.Restorable: a Pod's tolerations, …), why an undo was not
// applied (undo.ReasonUnauthentic, undo.ReasonClearText, …) and the objects refused, and
// returns the counts (Summary; Summary.Left says whether something was left). Nothing it
// prints holds object data or annotation values: only kinds, names, JSON Pointers and reasons,
// and for API errors their reason, code and field paths. JSON Pointers and field paths are
// quoted with every byte outside printable ASCII escaped, and a name that is not a plain
// Kubernetes name is quoted too: tenant text can neither forge a report line nor act on the
// terminal.
//
// The package does not read the undo key (package internal/undokey does; the caller passes the
// Ring), does not clean the virtual cluster's objects (their undos live in the vcluster's own
// store), and never deletes the key Secret.
package cleanup
