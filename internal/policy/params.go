package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// binding is one compiled MutatingAdmissionPolicyBinding.
type binding struct {
	name     string
	ref      *admissionregistrationv1.ParamRef // nil: one evaluation, params null
	selector labels.Selector                   // ref.selector; nil when ref names a param
	deny     bool                              // parameterNotFoundAction Deny
	params   []*unstructured.Unstructured      // the params of paramKind, by namespace then name
	cluster  bool                              // the params of paramKind are cluster-scoped
	match    *matchResources                   // spec.matchResources; nil: wherever the policy applies
}

// ErrParamConfig is wrapped by a request's error when a binding's params cannot be found as
// it asks (Deny with no param; a namespaced paramRef with no namespace on a cluster-scoped
// request): a configuration error, under the policy's failurePolicy.
var ErrParamConfig = errors.New("policy binding configuration error")

// bind checks and compiles opts.Bindings and opts.Params for p into out.
func (out *Policy) bind(p *admissionregistrationv1.MutatingAdmissionPolicy, opts Options) field.ErrorList {
	var errs field.ErrorList
	var params []*unstructured.Unstructured
	cluster, namespaced := false, false
	if pk := p.Spec.ParamKind; pk != nil {
		path := field.NewPath("spec", "paramKind")
		if pk.APIVersion == "" {
			errs = append(errs, field.Required(path.Child("apiVersion"), ""))
		}
		if pk.Kind == "" {
			errs = append(errs, field.Required(path.Child("kind"), ""))
		}
		for i, o := range opts.Params {
			if o == nil || o.GetAPIVersion() != pk.APIVersion || o.GetKind() != pk.Kind {
				continue
			}
			if o.GetName() == "" {
				errs = append(errs, field.Required(field.NewPath("params").Index(i).Child("metadata", "name"), ""))
				continue
			}
			if o.GetNamespace() == "" {
				cluster = true
			} else {
				namespaced = true
			}
			params = append(params, o)
		}
		if cluster && namespaced {
			errs = append(errs, field.Invalid(field.NewPath("params"), pk.Kind,
				"params of one paramKind are all namespaced or all cluster-scoped (metadata.namespace set on some, not on others)"))
		}
		slices.SortFunc(params, func(a, b *unstructured.Unstructured) int {
			if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
				return c
			}
			return strings.Compare(a.GetName(), b.GetName())
		})
	}
	for i, b := range opts.Bindings {
		path := field.NewPath("bindings").Index(i)
		spec := path.Child("spec")
		if b.Spec.PolicyName != p.Name {
			errs = append(errs, field.Invalid(spec.Child("policyName"), b.Spec.PolicyName, fmt.Sprintf("names no configured policy (this is policy %q)", p.Name)))
			continue
		}
		match, merrs := out.resolveBindingMatch(b.Spec.MatchResources, spec.Child("matchResources"), opts.Kinds)
		errs = append(errs, merrs...)
		cb := binding{name: b.Name, params: params, cluster: cluster, match: match}
		if r := b.Spec.ParamRef; r != nil {
			rp := spec.Child("paramRef")
			cb.ref = r
			switch {
			case p.Spec.ParamKind == nil:
				errs = append(errs, field.Forbidden(rp, "the policy has no spec.paramKind"))
			case r.Name != "" && r.Selector != nil:
				errs = append(errs, field.Forbidden(rp.Child("selector"), "name and selector are mutually exclusive"))
			case r.Name == "" && r.Selector == nil:
				errs = append(errs, field.Required(rp, "one of name or selector"))
			case r.Namespace != "" && cluster:
				errs = append(errs, field.Forbidden(rp.Child("namespace"), "the params of paramKind are cluster-scoped"))
			}
			if r.Selector != nil {
				s, err := metav1.LabelSelectorAsSelector(r.Selector)
				if err != nil {
					errs = append(errs, field.Invalid(rp.Child("selector"), r.Selector, err.Error()))
				}
				cb.selector = s
			}
			switch a := r.ParameterNotFoundAction; {
			case a == nil, *a == admissionregistrationv1.AllowAction:
			case *a == admissionregistrationv1.DenyAction:
				cb.deny = true
			default:
				errs = append(errs, field.NotSupported(rp.Child("parameterNotFoundAction"), *a, []string{string(admissionregistrationv1.AllowAction), string(admissionregistrationv1.DenyAction)}))
			}
		}
		out.bindings = append(out.bindings, cb)
	}
	return errs
}

// evaluations returns the evaluations of the policy for a request in namespace, as
// kube-apiserver's CollectParams: params null for a binding without a paramRef (and once for a
// policy without bindings), else one per param the paramRef selects (paramsOf: the config's
// and the ParamSource's), by namespace then name; a configuration error (wrapping
// ErrParamConfig) in place of a binding's evaluations when parameterNotFoundAction Deny finds
// none, a namespaced paramRef has no namespace, or the ParamSource fails.
func (p *Policy) evaluations(ctx context.Context, namespace string) []evaluation {
	if len(p.bindings) == 0 {
		return []evaluation{{}}
	}
	var out []evaluation
	for i := range p.bindings {
		b := &p.bindings[i]
		if b.ref == nil {
			out = append(out, evaluation{})
			continue
		}
		params, ns, err := p.paramsOf(ctx, b, namespace)
		if err != nil {
			out = append(out, evaluation{err: err})
			continue
		}
		for _, o := range params {
			out = append(out, evaluation{params: o})
		}
		if len(params) == 0 && b.deny {
			where := ""
			if ns != "" {
				where = " in namespace " + ns
			}
			out = append(out, evaluation{err: fmt.Errorf("%w: binding %q: no param of paramKind %s %s%s matches paramRef (parameterNotFoundAction Deny)", ErrParamConfig, b.name, p.paramKind.APIVersion, p.paramKind.Kind, where)})
		}
	}
	return out
}

// admissionNamespace returns the namespace of a request on obj as kube-apiserver's admission
// attributes give it (CEL's request.namespace; CollectParams defaults paramRef.namespace to
// it): obj's namespace, and for a v1 Namespace its own name (the apiserver's create, update
// and delete handlers set it so). namespaceObject stays null for a Namespace, as there.
func (t *target) admissionNamespace(obj metav1.Object) string {
	if t.gvr.Group == "" && t.gvr.Version == "v1" && t.gvr.Resource == "namespaces" {
		return obj.GetName()
	}
	return obj.GetNamespace()
}

// evaluation is one run of the policy: its params (nil: null), or the configuration error
// that takes its place.
type evaluation struct {
	params runtime.Object
	err    error
}
