package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/namespaces"
)

// ruleOperationOf returns the resource rule operation that lets hook type t run, or "" for
// the Get types (any operation lets them run).
func ruleOperationOf(t hooks.HookType) admissionregistrationv1.OperationType {
	switch t.Op() {
	case hooks.OpCreate:
		return admissionregistrationv1.Create
	case hooks.OpUpdate:
		return admissionregistrationv1.Update
	case hooks.OpDelete:
		return admissionregistrationv1.Delete
	default:
		return ""
	}
}

// MutateFunc returns the function that runs the policy for hook type t (see the package
// documentation for the request it sees). For an object of a kind the policy selects, whose
// rules let t run and that matches the rules' resourceNames and scope, the
// excludeResourceRules and the objectSelector, it evaluates the matchConditions (a false one,
// or with failurePolicy Ignore an error, returns the object unchanged) and then the mutations
// in order, each on the result of the one before, variables evaluated lazily per mutation. It
// returns a new object of the same Go type as obj (typed, or *unstructured.Unstructured),
// with obj's apiVersion/kind as they were, or obj itself when nothing ran. With failurePolicy
// Fail the first error is returned (wrapping ErrMutation); with Ignore a failing mutation is
// skipped and the next ones still run. Other objects are returned unchanged. It fails when t
// is not a valid hook type or no selected kind lets t run.
func (p *Policy) MutateFunc(t hooks.HookType) (hooks.MutateFunc, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("%w %q", hooks.ErrUnknownHookType, t)
	}
	runs := false
	for _, gvk := range p.kinds {
		if slices.Contains(p.HookTypes(gvk), t) {
			runs = true
			break
		}
	}
	if !runs {
		return nil, fmt.Errorf("policy %q: no resource rule lets %s run (its operations: %v)", p.name, t, p.allOperations())
	}
	ruleOp := ruleOperationOf(t)
	reqOp, withOld := admission.Operation(ruleOp), true
	switch ruleOp {
	case "":
		reqOp = admission.Update
	case admissionregistrationv1.Create, admissionregistrationv1.Update:
		withOld = false
	}
	return func(ctx context.Context, obj client.Object) (client.Object, error) {
		return p.mutate(ctx, t, ruleOp, reqOp, withOld, obj)
	}, nil
}

// namespaceOf returns the Namespace the object of hook type t came from, from ctx's
// namespaces.Source (namespaces.Source.Namespace), for what (the field that needs it); nil for
// a cluster-scoped object or one that names none (a host object vcluster did not sync). A
// namespaced object without a Source, or whose namespace does not exist or is not read by
// ctx's end, is an error naming the namespace: never a namespace without labels.
func namespaceOf(ctx context.Context, t hooks.HookType, obj client.Object, what string) (*corev1.Namespace, error) {
	if obj.GetNamespace() == "" {
		return nil, nil
	}
	src, ok := namespaces.From(ctx)
	if !ok {
		return nil, fmt.Errorf("%s: %w", what, namespaces.ErrNoSource)
	}
	_, ns, err := src.Namespace(ctx, t, obj.GetNamespace(), obj.GetAnnotations())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ns, nil
}

// oldObjectOf returns the old object of the call (hooks.DecodeOldObject) as a new object of the
// Go type of obj with the kind gvk, or nil when the call has none. An old object that does not
// decode is an error wrapping hooks.ErrMalformedOldObject and naming oldObject.
func oldObjectOf(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object) (client.Object, error) {
	if _, ok := hooks.OldObject(ctx); !ok {
		return nil, nil
	}
	old, ok := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if !ok { // unreachable: obj is a pointer to a struct that is a client.Object
		return nil, fmt.Errorf("oldObject: cannot make a %T", obj)
	}
	old.GetObjectKind().SetGroupVersionKind(gvk)
	if _, err := hooks.DecodeOldObject(ctx, old); err != nil {
		return nil, fmt.Errorf("oldObject: %w", err)
	}
	old.GetObjectKind().SetGroupVersionKind(gvk) // the CEL activation reads the kind from it, as from obj
	return old, nil
}

// oldForSelector returns the old object objectSelector also matches on an UPDATE, as
// kube-apiserver's object matcher does (the object or the old object): the call's old object
// (oldObjectOf) where ruleOp is Update and the call has one, else nil. One that does not
// decode fails the request, whatever the failurePolicy.
func (p *Policy) oldForSelector(ctx context.Context, gvk schema.GroupVersionKind, ruleOp admissionregistrationv1.OperationType, obj client.Object) (client.Object, error) {
	if ruleOp != admissionregistrationv1.Update {
		return nil, nil
	}
	old, err := oldObjectOf(ctx, gvk, obj)
	if err != nil {
		return nil, p.failure(err)
	}
	return old, nil
}

// allOperations returns the operations of every kind, once each.
func (p *Policy) allOperations() []admissionregistrationv1.OperationType {
	var out []admissionregistrationv1.OperationType
	for _, gvk := range p.kinds {
		for _, op := range p.Operations(gvk) {
			if !slices.Contains(out, op) {
				out = append(out, op)
			}
		}
	}
	return out
}

// ErrMutation is wrapped by the errors MutateFunc's functions return when the policy fails an
// object (failurePolicy Fail): a matchCondition or a mutation that fails to evaluate or apply.
var ErrMutation = errors.New("mutating admission policy failed")

// mutate runs the policy on obj for a request of operation reqOp, selected by rule operation
// ruleOp ("" for any); withOld sets oldObject to obj. For UPDATE (ruleOp Update) oldObject is
// the call's old object (hooks.OldObject: the stored object of an admission UPDATE), decoded
// into the Go type of obj with obj's kind, when the call has one and an expression names
// oldObject; else null.
func (p *Policy) mutate(ctx context.Context, hookType hooks.HookType, ruleOp admissionregistrationv1.OperationType, reqOp admission.Operation, withOld bool, obj client.Object) (client.Object, error) {
	gvk, typed, err := p.kindOf(obj)
	if err != nil {
		return nil, err
	}
	t := p.targets[gvk]
	// spec.matchConstraints, as kube-apiserver's matcher (matchResources): the rules, the
	// objectSelector, then the namespaceSelector (after the cheaper checks, as it may look the
	// Namespace up).
	if t == nil || !p.matchesRules(gvk, ruleOp, obj) {
		return obj, nil
	}
	if ok, err := p.matchesObject(ctx, p, gvk, ruleOp, obj); !ok {
		return obj, err
	}
	var ns *corev1.Namespace
	if bindingNS := p.bindingNamespaceSelector(); p.nsSelector != nil || p.readsNamespace || bindingNS != "" {
		what := "namespaceObject"
		switch {
		case p.nsSelector != nil:
			what = "spec.matchConstraints.namespaceSelector"
		case bindingNS != "":
			what = bindingNS
		}
		if ns, err = namespaceOf(ctx, hookType, obj, what); err != nil {
			return nil, p.failure(err)
		}
	}
	if !p.matchesNamespace(t.gvr, obj, ns) {
		return obj, nil
	}
	// The bindings whose matchResources match the request too (bound); none: the policy does
	// not run.
	if p, err = p.bound(ctx, gvk, t.gvr, ruleOp, obj, ns); p == nil {
		return obj, err
	}
	var tc managedfields.TypeConverter
	if p.applyConfig {
		if !typed {
			return nil, p.failure(fmt.Errorf("ApplyConfiguration on %s: synchook has no schema for it", gvk))
		}
		if tc, err = typeConverter(p.scheme); err != nil {
			return nil, p.failure(err)
		}
	}

	// The patchers and the CEL activation read the kind from the object.
	orig := obj.GetObjectKind().GroupVersionKind()
	if orig != gvk {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		defer obj.GetObjectKind().SetGroupVersionKind(orig)
	}
	var old runtime.Object
	switch {
	case withOld:
		old = obj
	case ruleOp == admissionregistrationv1.Update && p.readsOldObject:
		o, err := oldObjectOf(ctx, gvk, obj)
		if err != nil {
			return nil, p.failure(err) // a malformed request, whatever the failurePolicy
		}
		if o != nil {
			old = o
		}
	}
	attrs := admission.NewAttributesRecord(obj, old, gvk, t.admissionNamespace(obj), obj.GetName(), t.gvr, "", reqOp, nil, false, nil)
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk}
	va.VersionedObject.Set(obj)
	if old != nil {
		va.VersionedOldObject.Set(old)
	}
	for _, ev := range p.evaluations(ctx, t.admissionNamespace(obj)) {
		if ev.err != nil {
			if p.failurePolicy == admissionregistrationv1.Ignore {
				continue
			}
			return nil, p.failure(ev.err)
		}
		if err := p.evaluate(ctx, va, t, tc, ns, typed, gvk, ev.params); err != nil {
			return nil, err
		}
	}
	result, ok := va.VersionedObject.Object().(client.Object)
	if !ok {
		return nil, p.failure(fmt.Errorf("result is a %T, not an object", va.VersionedObject.Object()))
	}
	if result != obj {
		result.GetObjectKind().SetGroupVersionKind(orig)
	}
	return result, nil
}

// failure returns err as the policy's failure.
func (p *Policy) failure(err error) error {
	return fmt.Errorf("%w: policy %q: %w", ErrMutation, p.name, err)
}

// kindOf returns the GVK of obj and whether it is a typed object of the scheme.
func (p *Policy) kindOf(obj client.Object) (schema.GroupVersionKind, bool, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		gvk := u.GetObjectKind().GroupVersionKind()
		if gvk.Empty() {
			return gvk, false, errors.New("unstructured object without apiVersion and kind")
		}
		return gvk, false, nil
	}
	gvks, _, err := p.scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, false, err
	}
	gvk := gvks[0]
	if want := obj.GetObjectKind().GroupVersionKind(); !want.Empty() && slices.Contains(gvks, want) {
		gvk = want
	}
	return gvk, true, nil
}

// ruleMatches reports whether rule rr selects gvk, lists ruleOp ("" matches any operation),
// and matches the object's name and scope.
func ruleMatches(rr resolvedRule, gvk schema.GroupVersionKind, ruleOp admissionregistrationv1.OperationType, obj client.Object) bool {
	if !rr.kinds.Has(gvk) {
		return false
	}
	if ruleOp != "" && !slices.Contains(rr.rule.Operations, ruleOp) && !slices.Contains(rr.rule.Operations, admissionregistrationv1.OperationAll) {
		return false
	}
	if len(rr.rule.ResourceNames) > 0 && !slices.Contains(rr.rule.ResourceNames, obj.GetName()) {
		return false
	}
	if s := rr.rule.Scope; s != nil {
		switch *s {
		case admissionregistrationv1.NamespacedScope:
			return obj.GetNamespace() != ""
		case admissionregistrationv1.ClusterScope:
			return obj.GetNamespace() == ""
		}
	}
	return true
}

// typeConverters holds one lazily built type converter per scheme.
var typeConverters sync.Map // *runtime.Scheme → func() (managedfields.TypeConverter, error)

// typeConverter returns the ApplyConfiguration type converter of scheme: client-go's
// applyconfigurations type converter (the real schemas of the built-in kinds), built once per
// scheme on first use (~0.1 s). The error result is for converters that can fail to build;
// client-go's does not.
func typeConverter(scheme *runtime.Scheme) (managedfields.TypeConverter, error) {
	f, ok := typeConverters.Load(scheme)
	if !ok {
		f, _ = typeConverters.LoadOrStore(scheme, sync.OnceValues(func() (managedfields.TypeConverter, error) {
			return applyconfigurations.NewTypeConverter(scheme), nil
		}))
	}
	return f.(func() (managedfields.TypeConverter, error))()
}

// evaluate runs the matchConditions and mutations once with params (nil: null) on va's
// object, updating it.
func (p *Policy) evaluate(ctx context.Context, va *admission.VersionedAttributes, t *target, tc managedfields.TypeConverter, ns *corev1.Namespace, typed bool, gvk schema.GroupVersionKind, params runtime.Object) error {
	cctx := p.compiler.CreateContext(ctx)
	if p.matcher != nil {
		res := p.matcher.Match(cctx, va, params, nil)
		if res.Error != nil {
			return p.failure(fmt.Errorf("spec.matchConditions: %w", res.Error))
		}
		if !res.Matches {
			return nil
		}
	}
	req := patch.Request{
		MatchedResource:     t.gvr,
		VersionedAttributes: va,
		ObjectInterfaces:    p.objects,
		TypeConverter:       tc,
		Namespace:           ns, // namespaceObject
		OptionalVariables:   plugincel.OptionalVariableBindings{VersionedParams: params},
	}
	for i, m := range p.mutations {
		out, err := m.Patch(cctx, req, celconfig.RuntimeCELCostBudget)
		if err == nil && typed {
			if _, isU := out.(*unstructured.Unstructured); isU {
				out, err = p.scheme.ConvertToVersion(out, gvk.GroupVersion())
			}
		}
		if err != nil {
			if p.failurePolicy == admissionregistrationv1.Ignore {
				continue
			}
			return p.failure(fmt.Errorf("spec.mutations[%d]: %w", i, err))
		}
		va.UpdateObject(out)
	}
	return nil
}
