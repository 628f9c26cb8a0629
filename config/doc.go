// Package config reads synchook's configuration: which of the built-in hooks (package
// builtin: labels and strip; MutatingAdmissionPolicy hooks: policy and policyFile) run on which
// resources and hook types, whether their change is undone on reads, whether objects record
// which hook changed them (provenance), and the settings of the program's own Go hooks.
//
// The config is YAML, read from the file given with --config or, when there is none, from an
// environment variable holding the YAML itself: SYNCHOOK_CONFIG (plugin-v1.yaml passes it to
// the sidecar that way), and in vcluster plugin v2 mode first PLUGIN_CONFIG (plugin.yaml's
// plugins.synchook.config); with none of them, Default is used. Load picks the source and
// reports which one it used; it is the one loader of every command (serve, mutate, replay, test
// and both plugins). A relative policyFile is relative to the directory of the config file
// that names it; a config given in an environment variable (or to Parse) has no directory and
// refuses one. The user's reference is docs/config.md.
//
//	hooks:
//	  - name: team-labels            # unique; default "<kind-of-hook>-<index>" e.g. labels-0
//	    resources:                   # one or more
//	      - apiVersion: v1
//	        kind: Pod
//	    types: [CreatePhysical, UpdatePhysical]
//	    namespaces: [team-a]         # optional
//	    objectSelector:              # optional, metav1.LabelSelector
//	      matchLabels: {sync: "yes"}
//	    labels:                      # exactly one of labels, strip, policy, policyFile
//	      labels: {team: a}
//	      annotations: {owner: "team-a"}
//	    undo: false                  # optional, default true
//	  - name: strip-host-annotations
//	    resources: [{apiVersion: v1, kind: Pod}]
//	    types: [GetPhysical, UpdateVirtual]
//	    strip:
//	      paths: ["/metadata/annotations/host.example.com~1internal", "/status/hostIP"]
//
// Fields of an entry of hooks:
//
//   - name: the hook name shown in capabilities, logs and errors. Letters, digits, '-', '_'
//     and '.'; unique. Default: "labels-<index>", "strip-<index>" or "policy-<index>", the
//     index being the entry's position in the list. An entry with several resources registers
//     one hook per resource, named "<name>/<Kind>".
//   - resources: apiVersion and kind of the objects to hook. Kinds the scheme knows (v1 Pod,
//     apps/v1 Deployment, …) are decoded into their Go types; kinds of groups the scheme does
//     not know are custom resources and are handled as unstructured JSON. A kind the scheme does
//     not know in a group/version it does know (v1 Pdo) is an error, as is an unknown version of
//     a known group (apps/v2) and a list kind (v1 PodList).
//   - types: hook types, the exact wire strings CreatePhysical, UpdatePhysical,
//     DeletePhysical, GetPhysical, CreateVirtual, UpdateVirtual, DeleteVirtual, GetVirtual.
//   - namespaces: only objects in these namespaces are changed (for the *Physical types that
//     is the host namespace); cluster-scoped objects never match. Leave it out for all.
//   - objectSelector: only objects whose labels match are changed, as a webhook's
//     objectSelector; leave it out (or use {}) for all.
//   - labels: labels and annotations to add or overwrite (builtin.Labels). At least one.
//   - strip: RFC 6901 JSON Pointers of the fields to remove (builtin.Strip); "~1" stands for
//     "/" and "~0" for "~" in a key. Missing fields are skipped. apiVersion, kind,
//     metadata.name, metadata.namespace and metadata.uid (and their parents) cannot be
//     stripped.
//   - policy: an admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, inline as it would
//     be applied to a cluster; policyFile: the path of a file holding one. It is compiled at
//     load (internal/policy): a CEL error, reinvocationPolicy IfNeeded or an invalid
//     namespaceSelector is a config error. resources may be left out (the policy's
//     resourceRules give them), and each of types must be allowed by the rules' operations.
//   - bindings, params (only beside policy or policyFile): the policy's
//     MutatingAdmissionPolicyBindings and the param objects their paramRefs select from,
//     inline (docs/config.md, "Params and bindings"); a binding naming another policy and a
//     paramRef without the policy's paramKind are config errors. bindingsFile, paramsFile:
//     instead of bindings, params, a file of them (resolved as policyFile; every YAML
//     document one object or a v1 List); a bad document is named by its file and number.
//   - undo: default true, the write chain records its change in the synchook.io/undo
//     annotation and the paired Get type takes it off again; false lets the syncer and the
//     tenant see the change. Undo is per chain (a GVK and a write hook type): a chain with one
//     hook whose undo is false records no undo, so hooks of one chain that disagree on undo
//     (unset is true) are refused, naming both ("undo is per chain: …").
//
// At the top level, next to hooks:
//
//   - provenance: true makes every object a write chain changed carry the annotation
//     synchook.io/mutated-by, naming each hook that changed it (default false; serve's
//     --provenance turns it on too).
//   - settings: see below.
//
// Within a chain, config hooks run in config order; Go hooks that main registers before or
// after calling Build run before or after them.
//
// The top-level settings key holds the settings of the program's own Go hooks, in any shape
// their author chooses; synchook keeps it as written (Config.Settings) and the author decodes
// it with plugin.UnmarshalConfig (Config.DecodeSettings), as strictly as the rest:
//
//	settings:
//	  tenant: team-a
//	  required: [password]
//
// The config is checked strictly. Decoding is one strict pass (sigs.k8s.io/yaml, then
// sigs.k8s.io/json as for the Kubernetes API): YAML syntax errors, duplicate keys, unknown or
// misspelled keys (keys are case-sensitive) and values of the wrong shape are errors that name
// where they are, e.g.
//
//	hooks[0]: unknown field "labls" (valid: bindings, bindingsFile, hostParams, image, labels, name, namespaces, objectSelector, params, paramsFile, policy, policyFile, resources, strip, types, undo)
//
// The decoded config is then validated into a field.ErrorList (k8s.io/apimachinery): unknown
// hook types and resources, malformed JSON Pointers, invalid label keys and values (as
// metav1validation.ValidateLabels checks them), annotation keys (apivalidation.ValidateAnnotations),
// namespaces and selectors are all reported at once, each with its field path, e.g.
//
//	hooks[0].types[1]: Invalid value: unknown hook type "CreatPhysical" (valid: CreatePhysical, …)
//	hooks[0].labels.labels[team a]: Invalid value: "team a": name part must consist of …
//
// Every such error wraps ErrInvalid; several are listed as "[<err>, <err>, …]", the format of
// ErrorList.ToAggregate. An empty config, or "hooks: []", has no hooks: that is how to turn off
// the default.
//
// The default, used when neither the file nor the environment variable is set, is one hook (a
// program with Go hooks registered through package plugin runs no config hooks instead):
//
//	hooks:
//	  - name: default-labels
//	    resources: [{apiVersion: v1, kind: Pod}]
//	    types: [CreatePhysical, UpdatePhysical]
//	    labels:
//	      labels: {synchook.io/hooked: "true"}
package config
