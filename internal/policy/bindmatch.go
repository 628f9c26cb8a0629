package policy

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// matchResources is a resolved MatchResources: a policy's spec.matchConstraints or a binding's
// spec.matchResources. One rule matches both against a request, as kube-apiserver's
// matching.Matcher does: namespaceSelector, objectSelector, excludeResourceRules, then
// resourceRules (none: every kind, which only a binding may leave out).
type matchResources struct {
	includes   []resolvedRule  // resourceRules
	excludes   []resolvedRule  // excludeResourceRules
	selector   labels.Selector // objectSelector; nil: every object
	nsSelector labels.Selector // namespaceSelector; nil: every namespace
}

// resolveMatch checks mc (found at path) and resolves its rules to the kinds of idx. A
// resource of an include rule that selects no kind is an error; matchPolicy may be Exact or
// Equivalent and has no effect (a hook gets the exact kind).
func resolveMatch(mc *admissionregistrationv1.MatchResources, path *field.Path, idx *kindIndex) (matchResources, field.ErrorList) {
	var m matchResources
	var errs field.ErrorList
	var err *field.Error
	if m.nsSelector, err = selectorOf(mc.NamespaceSelector, path.Child("namespaceSelector")); err != nil {
		errs = append(errs, err)
	}
	if m.selector, err = selectorOf(mc.ObjectSelector, path.Child("objectSelector")); err != nil {
		errs = append(errs, err)
	}
	if mp := mc.MatchPolicy; mp != nil && *mp != admissionregistrationv1.Exact && *mp != admissionregistrationv1.Equivalent {
		errs = append(errs, field.NotSupported(path.Child("matchPolicy"), *mp, []string{string(admissionregistrationv1.Exact), string(admissionregistrationv1.Equivalent)}))
	}
	for i, r := range mc.ResourceRules {
		rr, rerrs := idx.resolve(r, path.Child("resourceRules").Index(i), true)
		errs = append(errs, rerrs...)
		m.includes = append(m.includes, rr)
	}
	for i, r := range mc.ExcludeResourceRules {
		rr, rerrs := idx.resolve(r, path.Child("excludeResourceRules").Index(i), false)
		errs = append(errs, rerrs...)
		m.excludes = append(m.excludes, rr)
	}
	return m, errs
}

// matchesRules reports whether an include rule (any kind when there is none) and no exclude
// rule match the request: the object obj of kind gvk, for rule operation ruleOp.
func (m *matchResources) matchesRules(gvk schema.GroupVersionKind, ruleOp admissionregistrationv1.OperationType, obj client.Object) bool {
	in := len(m.includes) == 0
	for _, rr := range m.includes {
		if ruleMatches(rr, gvk, ruleOp, obj) {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, rr := range m.excludes {
		if ruleMatches(rr, gvk, ruleOp, obj) {
			return false
		}
	}
	return true
}

// matchesObject reports whether the objectSelector matches obj or, as kube-apiserver's object
// matcher on an UPDATE (ruleOp Update), the call's old object (p.oldForSelector, whose error
// it returns).
func (m *matchResources) matchesObject(ctx context.Context, p *Policy, gvk schema.GroupVersionKind, ruleOp admissionregistrationv1.OperationType, obj client.Object) (bool, error) {
	if m.selector == nil || m.selector.Matches(labels.Set(obj.GetLabels())) {
		return true, nil
	}
	old, err := p.oldForSelector(ctx, gvk, ruleOp, obj)
	if err != nil || old == nil {
		return false, err
	}
	return m.selector.Matches(labels.Set(old.GetLabels())), nil
}

// matchesNamespace reports whether the namespaceSelector matches the request, as
// kube-apiserver's namespace matcher applies it: a Namespace (resource gvr) is judged by its
// own labels (the object of the request: the host object a physical hook writes, the stored
// one a Delete hook is given), another cluster-scoped object is never excluded, and a
// namespaced object is judged by ns, the Namespace it came from (namespaceOf), where a host
// object that names no namespace (nil: vcluster did not sync it) is not selected.
func (m *matchResources) matchesNamespace(gvr schema.GroupVersionResource, obj client.Object, ns *corev1.Namespace) bool {
	switch {
	case m.nsSelector == nil:
		return true
	case gvr.Group == "" && gvr.Resource == "namespaces":
		return m.nsSelector.Matches(labels.Set(obj.GetLabels()))
	case obj.GetNamespace() == "":
		return true
	default:
		return ns != nil && m.nsSelector.Matches(labels.Set(ns.Labels))
	}
}

// bindingNamespaceSelector returns the field of the first binding whose matchResources has a
// namespaceSelector (the request then looks its Namespace up, naming that field in the
// error), or "" when none has.
func (p *Policy) bindingNamespaceSelector() string {
	for _, b := range p.bindings {
		if b.match != nil && b.match.nsSelector != nil {
			return fmt.Sprintf("binding %q: spec.matchResources.namespaceSelector", b.name)
		}
	}
	return ""
}

// resolveBindingMatch resolves a binding's spec.matchResources (at path) against the kinds of
// the policy's scheme and of custom; nil when mc is nil (the binding applies wherever the
// policy does).
func (out *Policy) resolveBindingMatch(mc *admissionregistrationv1.MatchResources, path *field.Path, custom []schema.GroupVersionKind) (*matchResources, field.ErrorList) {
	if mc == nil {
		return nil, nil
	}
	m, errs := resolveMatch(mc, path, newKindIndex(out.scheme, custom))
	return &m, errs
}

// bound returns the policy as bound for a request the policy's matchConstraints match (the
// object obj of kind gvk and resource gvr, rule operation ruleOp, from the Namespace ns), as
// kube-apiserver's dispatcher: a binding applies only when its matchResources (if any) match
// the request too, by the same rule (matchResources). It returns p itself when every binding
// applies (or there is none), nil when bindings were given and none applies (the policy does
// not run), else a copy of p with only the bindings that apply, in their order.
func (p *Policy) bound(ctx context.Context, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, ruleOp admissionregistrationv1.OperationType, obj client.Object, ns *corev1.Namespace) (*Policy, error) {
	var applies []binding
	all := true
	for _, b := range p.bindings {
		if b.match != nil {
			ok := b.match.matchesRules(gvk, ruleOp, obj) && b.match.matchesNamespace(gvr, obj, ns)
			if ok {
				var err error
				if ok, err = b.match.matchesObject(ctx, p, gvk, ruleOp, obj); err != nil {
					return nil, err
				}
			}
			if !ok {
				all = false
				continue
			}
		}
		applies = append(applies, b)
	}
	switch {
	case all:
		return p, nil
	case len(applies) == 0:
		return nil, nil
	}
	q := *p
	q.bindings = applies
	return &q, nil
}
