// Package policy runs a Kubernetes MutatingAdmissionPolicy (admissionregistration.k8s.io/v1)
// as a synchook hook: the same object a user would `kubectl apply`, with its CEL expressions
// compiled and its patches applied by the Kubernetes libraries themselves
// (k8s.io/apiserver's admission/plugin/cel compiler and variables, admission/plugin/webhook's
// matchconditions, admission/plugin/policy/mutating/patch's JSONPatch and ApplyConfiguration
// patchers, and the CEL environment of k8s.io/apiserver/pkg/cel/environment, with the
// per-expression cost limit and the per-mutation runtime budget the apiserver uses).
//
// Use: Parse (or ParseFile) a manifest, Compile it against the registry's scheme, register one
// hook per kind of Policy.Resources for the hook types the config asks for, each running
// Policy.MutateFunc of its hook type. Which objects a policy applies to is synchook's hook
// config (its namespaces and objectSelector) with the policy's matchConstraints; a binding
// (Options.Bindings) adds params.
//
// Hook type → admission request:
//
//	Create*  operation CREATE, object = the object, oldObject = null
//	Update*  operation UPDATE, object = the object, oldObject = the stored object when the
//	         transport sends one (admission UPDATE: request.oldObject, hooks.OldObject),
//	         decoded like the object (same Go type and kind); null when it sends none
//	         (vcluster's plugin protocols never do)
//	Delete*  operation DELETE, object = oldObject = the object
//	Get*     operation UPDATE, object = oldObject = the object (there is no admission
//	         operation for a read; this keeps both variables set)
//
// A resource rule's operation lets the matching hook types run: CREATE → Create*,
// UPDATE → Update*, DELETE → Delete*, and any listed operation (or "*") → Get*.
//
// Differences from a cluster:
//   - Params from Options.Params (the config's objects) and, when set, Options.ParamSource (the
//     host cluster's, package paramsource, which never gives the tenant's objects; not under
//     policyreg.ConfigParamsOnly, the load-time self-test); bindings
//     from Options.Bindings, run in the order given, the params a paramRef selects by
//     namespace then name (Kubernetes defines no order). A policy without bindings is bound
//     once with params null. Refused at load where a cluster would accept: a binding naming
//     another policy, a paramRef without spec.paramKind. A binding's matchResources is matched
//     as kube-apiserver matches it, by the rule of spec.matchConstraints (below): a binding
//     applies only where both match, and a policy none of whose bindings applies does not run.
//     A paramRef's namespace defaults to the request's namespace as kube-apiserver's admission
//     attributes give it: the object's namespace, and a Namespace's own name (CEL's
//     request.namespace is that too; namespaceObject stays null for a Namespace). Another
//     cluster-scoped object without one, and parameterNotFoundAction Deny finding none, are
//     configuration errors (ErrParamConfig) under the failurePolicy.
//   - No reinvocation: spec.reinvocationPolicy IfNeeded is refused; Never is what runs. The
//     apiserver requires the field; synchook treats a missing one as Never.
//   - No defaulting: a cluster defaults the object after every mutation (e.g. a container
//     added by a policy gets terminationMessagePath, imagePullPolicy); synchook does not, so
//     later mutations of the same policy see the fields as the previous mutation left them.
//   - No authorizer: synchook runs behind a syncer (or the apiserver's webhook call) with no
//     requesting user to authorize, so a policy with an expression that uses `authorizer`
//     (or authorizer.requestResource) is refused at load, naming the expression's field
//     (e.g. spec.matchConditions[1].expression).
//   - oldObject on Update* is the caller's input, as the object is: it is never patched and
//     never used for the object's identity; one that does not decode fails the request
//     (whatever the failurePolicy). It is decoded only for a policy whose expressions name
//     oldObject.
//   - namespaceObject is the Namespace the object came from, from the request's
//     namespaces.Source (under vcluster the tenant's namespace in the virtual cluster, named
//     by the host object's vcluster.loft.sh/object-namespace; see package namespaces), with its
//     name, uid, labels and annotations only; null for a cluster-scoped object (and a host
//     object vcluster did not sync, which names none). A namespaced object in a request
//     without a Source (offline), or whose namespace does not exist or is not read by the
//     request's deadline (a namespace cache that has not seen it waits for it: see
//     namespaces.Cache), fails the request with an error naming the namespace
//     (namespaces.ErrNoSource, ErrNotFound, ErrUnknown): the policy never runs as if the
//     namespace had no labels. request.userInfo is empty; request.dryRun is false and
//     request.options is null.
//   - spec.matchConstraints.namespaceSelector matches that Namespace's labels, looked up as
//     for namespaceObject, with the same errors: a NotIn selector never skips an object
//     because its namespace is not known yet. As kube-apiserver's namespace matcher, it judges a
//     Namespace by the Namespace's own labels (the object the hook is given) and never excludes
//     another cluster-scoped object. objectSelector matches the object or, on an UPDATE with an
//     old object, the old object (as kube-apiserver's object matcher). excludeResourceRules,
//     resourceNames and scope are honoured; matchPolicy has no effect (the hook gets the exact
//     kind).
//   - A policy on DELETE does nothing in a cluster (there is no object to mutate); here
//     Delete* hooks mutate the object they are given.
//   - ApplyConfiguration needs the schema of the kind: it works for the kinds of the scheme
//     (built-in kinds with client-go's scheme) and is refused for custom resources, which
//     can use JSONPatch.
package policy
