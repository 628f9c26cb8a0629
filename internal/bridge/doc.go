// Package bridge serves an engine.Registry to real vcluster over its plugin v1 gRPC protocol
// (package remote, generated from remote.proto: vcluster's own wire protocol, names and numbers
// unchanged), so that synchook runs as a sidecar declared under the vcluster chart's legacy
// plugin: values key.
//
// A Bridge does two things (Run):
//
//   - It serves remote.Plugin/Mutate on the plugin address (VCLUSTER_PLUGIN_ADDRESS, e.g.
//     localhost:14000). Mutate runs the same chain as POST /mutate/{hookType}
//     (engine.Runner.Mutate) and answers mutated=false when nothing changed, there are no hooks for
//     (apiVersion, kind, type) or the type is not one of the eight (ApplyPhysical), else
//     mutated=true with the whole object; hook failures become gRPC errors (StatusCode).
//     vcluster opens a new connection for every call: the server adds nothing per connection
//     beyond gRPC's own (no interceptors or stats handlers).
//   - It registers with vcluster's plugin server (default localhost:10099): RegisterPlugin with
//     version "v1", the plugin name, its address as an IP literal (a host name would cost
//     vcluster a DNS lookup on every call) and one ClientHook per hooked GVK with its hook
//     types. It retries with backoff until vcluster answers (vcluster may start later), polls
//     IsLeader and registers again when the run ID changes (vcluster restarted and forgot it).
//     It registers even with no hooks, because vcluster waits for every plugin: key.
//
// # The answer and how vcluster reads it
//
// vcluster decodes the answer with encoding/json's Unmarshal into the object it sent, not into
// a new one. That decoder merges: it keeps map keys that the answer lacks, keeps struct fields
// that the answer lacks, ignores null for strings, numbers, bools and structs, decodes array
// elements into the existing slice elements (even stale ones between length and capacity), and
// reuses the target of a non-nil pointer. So the plain hooked object loses every removal: a
// deleted label or annotation, an emptied omitempty field, a nil pointer, a removed slice
// element or a field removed inside one all survive. (The vcluster SDK had that bug.)
//
// The answer is therefore encoded for a merging decoder (engine.Result.Answer, package answer:
// the request's bytes with the chain's edits, along the Go type of the kind — the registry's
// type, which is the type vcluster decodes into; Mutate never decodes the object itself). At
// each edited member it emits, following the type:
//
//   - struct: the keys of the hooked object, and for each key the request had and the hooked
//     object lacks, the value that zeroes that field: "" for a string, 0 for a number, false
//     for a bool, null for a pointer, map, slice or interface, null for a type with its own
//     UnmarshalJSON (metav1.Time, resource.Quantity: null zeroes them), and for a nested
//     struct an object that zeroes each of its keys in turn;
//   - map that lost a key: the key twice, "labels":null then "labels":{…the whole new map…}.
//     encoding/json applies repeated keys in order (the last wins, and sigs.k8s.io/json does
//     the same), null resets the map to nil and the second value fills a new map. Deleting one
//     key in place is impossible: null for a map[string]string entry stores "" under the key;
//   - slice that changed: "containers":null then the new array, so that every element is
//     decoded fresh instead of into an old or stale element;
//   - pointer that was set and still is: the rules for the pointed-to type (the decoder reuses
//     it); a new or nil pointer: the plain value or null;
//   - intstr.IntOrString that changed: first the zero of the other member ("" or 0), then the
//     value, as its UnmarshalJSON sets only one member and keeps the other;
//   - anything else (unchanged values, scalars, types with their own UnmarshalJSON): the plain
//     hooked value.
//
// The tests prove it for each case — labels, annotations, all labels, omitempty strings,
// bools and ints, pointers to scalars, structs and metav1.Time, an omitzero metav1.Time, a
// removed first slice element, fields removed inside slice elements, stale slice capacity, a
// map of Quantities, a whole struct zeroed, owner references, IntOrString (also behind a
// pointer) and Secret data: json.Unmarshal of the answer into the request object gives the
// hooked object (same JSON and equality.Semantic.DeepEqual), while the plain hooked JSON does
// not; and a new object decoded from the answer (encoding/json or sigs.k8s.io/json) is the
// hooked object too, so a plugin after synchook in vcluster's chain reads it correctly.
//
// Limits: a kind the registry does not know as a Go type is answered plainly (vcluster decodes
// such kinds into *unstructured.Unstructured, whose UnmarshalJSON replaces its whole content,
// so no trick is needed); a field the registry's Go types do not know is passed through
// plainly; a type whose UnmarshalJSON keeps old state (other than IntOrString) is not
// corrected. With more than one plugin, vcluster decodes only the last answer into its object,
// so exactness holds against what the previous plugin answered.
//
// The package does not serve admission requests (package webhook) and does not create
// certificates: the plugin protocol is plain gRPC on loopback inside the pod.
package bridge
