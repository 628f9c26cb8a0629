package policy

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	celgo "github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/synchook/synchook/hooks"
)

// Options are the settings of CompileWithOptions. The zero value compiles against client-go's
// scheme with no custom resources.
type Options struct {
	// Scheme knows the typed kinds (the registry's scheme); nil means client-go's scheme.
	// A resource rule names resources ("pods"); the kinds of the scheme are matched by their
	// plural as meta.UnsafeGuessKindToResource guesses it from the kind ("Pod" → "pods").
	Scheme *runtime.Scheme
	// Kinds are the custom resource kinds (ones the scheme does not know) that the resource
	// rules may name, matched by the same guessed plural ("example.com/v1 Widget" →
	// "widgets"). A rule resource that matches no kind of the scheme nor of Kinds is an error.
	// Kinds the scheme knows are ignored here.
	Kinds []schema.GroupVersionKind
	// Bindings are the MutatingAdmissionPolicyBindings of the policy (each spec.policyName is
	// the policy's name). None: the policy is bound once, with params null. The policy runs
	// once per binding, in the order given, and per binding once per param it selects.
	Bindings []admissionregistrationv1.MutatingAdmissionPolicyBinding
	// Params are the param objects the bindings' paramRefs select from: those of the
	// policy's spec.paramKind (apiVersion and kind); others are ignored.
	Params []*unstructured.Unstructured
	// ParamSource, when set, gives params beside Params on every request (the host cluster's,
	// package paramsource), except under policyreg.ConfigParamsOnly (the load-time
	// self-test); a Params object of the same namespace and name wins. Its errors are
	// configuration errors under the failurePolicy. Default nil: Params only.
	ParamSource ParamSource
}

// Policy is a compiled MutatingAdmissionPolicy. It is safe for concurrent use; its compiled
// programs are shared by every call.
type Policy struct {
	name          string
	failurePolicy admissionregistrationv1.FailurePolicyType
	scheme        *runtime.Scheme
	objects       admission.ObjectInterfaces
	compiler      *plugincel.CompositedCompiler
	matcher       matchconditions.Matcher
	mutations     []patch.Patcher
	applyConfig   bool // some mutation is an ApplyConfiguration: needs the type converter
	targets       map[schema.GroupVersionKind]*target
	kinds         []schema.GroupVersionKind // the keys of targets, in rule order
	// matchResources is spec.matchConstraints (its includes select targets).
	matchResources
	// readsNamespace: an expression names namespaceObject, so a request looks its namespace up
	// (one that does not costs no lookup and cannot fail on one).
	readsNamespace bool
	// readsOldObject: an expression names oldObject, so an UPDATE decodes the call's old object
	// (hooks.OldObject) for it; a policy that does not costs no decode.
	readsOldObject bool
	// paramKind is spec.paramKind (nil: no params); bindings the policy's bindings, nil when
	// none was given (bound once, params null).
	paramKind *admissionregistrationv1.ParamKind
	bindings  []binding
	params    ParamSource // Options.ParamSource; nil: the config's params only
}

// readsNamespaceObject reports whether an expression of spec (variables, matchConditions,
// mutations) names namespaceObject.
func readsNamespaceObject(spec admissionregistrationv1.MutatingAdmissionPolicySpec) bool {
	var exprs []string
	for _, v := range spec.Variables {
		exprs = append(exprs, v.Expression)
	}
	for _, c := range spec.MatchConditions {
		exprs = append(exprs, c.Expression)
	}
	for _, m := range spec.Mutations {
		if m.JSONPatch != nil {
			exprs = append(exprs, m.JSONPatch.Expression)
		}
		if m.ApplyConfiguration != nil {
			exprs = append(exprs, m.ApplyConfiguration.Expression)
		}
	}
	return slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, "namespaceObject") })
}

// target is one kind the policy's resource rules select.
type target struct {
	gvr   schema.GroupVersionResource
	typed bool           // the scheme knows the kind
	rules []resolvedRule // the rules (resourceRules) that select it
}

// resolvedRule is one rule of the policy with the kinds it selects.
type resolvedRule struct {
	rule  admissionregistrationv1.NamedRuleWithOperations
	kinds sets.Set[schema.GroupVersionKind]
}

// Compile compiles p against scheme (nil: client-go's scheme); it is
// CompileWithOptions(p, Options{Scheme: scheme}).
func Compile(p *admissionregistrationv1.MutatingAdmissionPolicy, scheme *runtime.Scheme) (*Policy, error) {
	return CompileWithOptions(p, Options{Scheme: scheme})
}

// CompileWithOptions validates p, resolves its resource rules to kinds and compiles every CEL
// expression (variables, matchConditions, mutations) once, with the CEL environment and cost
// limits of the apiserver. All problems are reported together, as a field.ErrorList aggregate
// wrapped with ErrInvalid, each naming its field, e.g.
// `spec.mutations[0].jsonPatch.expression: Invalid value: "...": compilation failed: ...`.
// Refused: a missing metadata.name; a binding or param that bind rejects (see Options); an expression that uses
// authorizer (no requesting user; the error names the expression's field, e.g.
// spec.matchConditions[1].expression); spec.reinvocationPolicy IfNeeded (no reinvocation); resource rules with subresources ("pods/status") or resources "*"; a rule resource that
// matches no kind; an ApplyConfiguration mutation when a selected kind is a custom resource
// (no schema); an unknown failurePolicy, patchType or operation. failurePolicy defaults to
// Fail, reinvocationPolicy to Never.
func CompileWithOptions(p *admissionregistrationv1.MutatingAdmissionPolicy, opts Options) (*Policy, error) {
	if p == nil {
		return nil, invalidf("nil policy")
	}
	scheme := opts.Scheme
	scheme = cmp.Or(scheme, clientgoscheme.Scheme)
	out := &Policy{
		name:          p.Name,
		failurePolicy: admissionregistrationv1.Fail,
		scheme:        scheme,
		objects:       admission.NewObjectInterfacesFromScheme(scheme),
	}
	var errs field.ErrorList
	if p.Name == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), ""))
	}
	spec := field.NewPath("spec")
	out.paramKind = p.Spec.ParamKind
	if p.Spec.ParamKind != nil {
		out.params = opts.ParamSource
	}
	errs = append(errs, out.bind(p, opts)...)
	if fp := p.Spec.FailurePolicy; fp != nil {
		switch *fp {
		case admissionregistrationv1.Fail, admissionregistrationv1.Ignore:
			out.failurePolicy = *fp
		default:
			errs = append(errs, field.NotSupported(spec.Child("failurePolicy"), *fp, []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}))
		}
	}
	switch rp := p.Spec.ReinvocationPolicy; rp {
	case "", admissionregistrationv1.NeverReinvocationPolicy:
	case admissionregistrationv1.IfNeededReinvocationPolicy:
		errs = append(errs, field.Forbidden(spec.Child("reinvocationPolicy"), "IfNeeded is not supported: synchook runs each policy once (Never)"))
	default:
		errs = append(errs, field.NotSupported(spec.Child("reinvocationPolicy"), rp, []string{string(admissionregistrationv1.NeverReinvocationPolicy)}))
	}
	errs = append(errs, out.resolve(p.Spec.MatchConstraints, spec.Child("matchConstraints"), opts.Kinds)...)
	errs = append(errs, out.compile(p, spec)...)
	out.readsNamespace = readsNamespaceObject(p.Spec)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalid, p.Name, errs.ToAggregate())
	}
	if out.applyConfig {
		tc, err := typeConverter(scheme)
		if err != nil {
			return nil, invalidf("%q: ApplyConfiguration: %w", p.Name, err)
		}
		for _, gvk := range out.kinds {
			stub := &unstructured.Unstructured{}
			stub.SetGroupVersionKind(gvk)
			if _, err := tc.ObjectToTyped(stub); err != nil {
				errs = append(errs, field.Invalid(spec.Child("matchConstraints", "resourceRules"), gvk.String(),
					fmt.Sprintf("ApplyConfiguration needs the schema of %s, which client-go's type converter does not have (%v); use JSONPatch", gvk, err)))
			}
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("%w %q: %w", ErrInvalid, p.Name, errs.ToAggregate())
		}
	}
	return out, nil
}

// compileMode compiles the policy's expressions as the apiserver compiles new ones (not as
// stored ones).
const compileMode = environment.NewExpressions

// compile compiles the variables, matchConditions and mutations of p into out, returning the
// problems.
func (out *Policy) compile(p *admissionregistrationv1.MutatingAdmissionPolicy, spec *field.Path) field.ErrorList {
	envs := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	compiler, err := plugincel.NewCompositedCompiler(envs)
	if err != nil {
		return field.ErrorList{field.InternalError(spec, fmt.Errorf("CEL compiler: %w", err))}
	}
	out.compiler = compiler
	env, err := envs.Env(compileMode)
	if err != nil {
		return field.ErrorList{field.InternalError(spec, fmt.Errorf("CEL environment: %w", err))}
	}
	// No params and no authorizer: expressions that use them do not compile; one that uses
	// authorizer is refused with why, in place of CEL's "undeclared reference".
	refused, authErrs := out.scanIdentifiers(env, p.Spec, spec)
	decls := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	errs := compileVariables(compiler, p.Spec.Variables, spec, decls)
	errs = append(errs, out.compileMatchConditions(compiler, p, spec, decls)...)
	errs = append(errs, out.compileMutations(compiler, p.Spec.Mutations, spec, decls)...)
	errs = slices.DeleteFunc(errs, func(e *field.Error) bool { return e.Type == field.ErrorTypeInvalid && refused.Has(e.Field) })
	return append(authErrs, errs...)
}

// noAuthorizer is why an expression that uses authorizer is refused.
const noAuthorizer = "uses authorizer: synchook runs behind a syncer, with no requesting user to authorize " +
	"(request.userInfo is empty), so authorizer and authorizer.requestResource are not available"

// scanIdentifiers reads which variables the expressions of spec (at specPath) name, from their
// syntax trees (freeIdentifiers): it sets out.readsOldObject when one names oldObject, and
// returns the fields (paths as strings) of those that name authorizer with an error for each.
func (out *Policy) scanIdentifiers(env *celgo.Env, spec admissionregistrationv1.MutatingAdmissionPolicySpec, specPath *field.Path) (sets.Set[string], field.ErrorList) {
	type expression struct {
		path *field.Path
		text string
	}
	var exprs []expression
	for i, v := range spec.Variables {
		exprs = append(exprs, expression{specPath.Child("variables").Index(i).Child("expression"), v.Expression})
	}
	for i, c := range spec.MatchConditions {
		exprs = append(exprs, expression{specPath.Child("matchConditions").Index(i).Child("expression"), c.Expression})
	}
	for i, m := range spec.Mutations {
		path := specPath.Child("mutations").Index(i)
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			exprs = append(exprs, expression{path.Child("jsonPatch", "expression"), m.JSONPatch.Expression})
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			exprs = append(exprs, expression{path.Child("applyConfiguration", "expression"), m.ApplyConfiguration.Expression})
		}
	}
	refused := sets.New[string]()
	var errs field.ErrorList
	for _, e := range exprs {
		ids := freeIdentifiers(env, e.text)
		if ids.Has("oldObject") {
			out.readsOldObject = true
		}
		if ids.Has("authorizer") {
			refused.Insert(e.path.String())
			errs = append(errs, field.Invalid(e.path, e.text, noAuthorizer))
		}
	}
	return refused, errs
}

// freeIdentifiers returns the identifiers that expression reads from its environment, as env
// parses it: every identifier not bound inside it by a comprehension (all, exists, map, filter,
// cel.bind, …) where it appears; authorizer in authorizer.requestResource, not fields
// (object.authorizer) nor text ("authorizer"). nil when expression does not parse (its
// compilation says why).
func freeIdentifiers(env *celgo.Env, expression string) sets.Set[string] {
	parsed, iss := env.Parse(expression)
	if iss.Err() != nil {
		return nil
	}
	out := sets.New[string]()
	addFree(parsed.NativeRep().Expr(), nil, out)
	return out
}

// addFree adds to out the identifiers of e not in bound (the comprehension variables in scope).
func addFree(e celast.Expr, bound []string, out sets.Set[string]) {
	switch e.Kind() {
	case celast.IdentKind:
		if name := strings.TrimPrefix(e.AsIdent(), "."); !slices.Contains(bound, name) {
			out.Insert(name)
		}
	case celast.SelectKind:
		addFree(e.AsSelect().Operand(), bound, out)
	case celast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			addFree(call.Target(), bound, out)
		}
		for _, a := range call.Args() {
			addFree(a, bound, out)
		}
	case celast.ListKind:
		for _, el := range e.AsList().Elements() {
			addFree(el, bound, out)
		}
	case celast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			addFree(entry.AsMapEntry().Key(), bound, out)
			addFree(entry.AsMapEntry().Value(), bound, out)
		}
	case celast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			addFree(f.AsStructField().Value(), bound, out)
		}
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		addFree(c.IterRange(), bound, out)
		addFree(c.AccuInit(), bound, out)
		loop := append(slices.Clip(bound), c.IterVar(), c.AccuVar())
		if c.HasIterVar2() {
			loop = append(loop, c.IterVar2())
		}
		addFree(c.LoopCondition(), loop, out)
		addFree(c.LoopStep(), loop, out)
		addFree(c.Result(), append(slices.Clip(bound), c.AccuVar()), out)
	}
}

// checkNamed returns the problems of the name and expression of the entry at path (a variable
// or a matchCondition): both required, the name unique among names, which it joins.
func checkNamed(path *field.Path, name, expression string, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	switch {
	case name == "":
		errs = append(errs, field.Required(path.Child("name"), ""))
	case names.Has(name):
		errs = append(errs, field.Duplicate(path.Child("name"), name))
	}
	names.Insert(name)
	if expression == "" {
		errs = append(errs, field.Required(path.Child("expression"), ""))
	}
	return errs
}

// compileVariables checks spec.variables and stores each in compiler, for the expressions
// compiled after them, returning the problems.
func compileVariables(compiler *plugincel.CompositedCompiler, vars []admissionregistrationv1.Variable, spec *field.Path, decls plugincel.OptionalVariableDeclarations) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range vars {
		path := spec.Child("variables").Index(i)
		errs = append(errs, checkNamed(path, v.Name, v.Expression, names)...)
		if v.Expression == "" {
			continue
		}
		res := compiler.CompileAndStoreVariable(&variable{name: v.Name, expression: v.Expression}, decls, compileMode)
		if res.Error != nil {
			errs = append(errs, field.Invalid(path.Child("expression"), v.Expression, res.Error.Detail))
		}
	}
	return errs
}

// compileMatchConditions checks and compiles the matchConditions of p into out.matcher (left
// nil when there are none), returning the problems.
func (out *Policy) compileMatchConditions(compiler *plugincel.CompositedCompiler, p *admissionregistrationv1.MutatingAdmissionPolicy, spec *field.Path, decls plugincel.OptionalVariableDeclarations) field.ErrorList {
	if len(p.Spec.MatchConditions) == 0 {
		return nil
	}
	var errs field.ErrorList
	conds := slices.Clone(p.Spec.MatchConditions)
	accessors := make([]plugincel.ExpressionAccessor, len(conds))
	names := sets.New[string]()
	for i := range conds {
		errs = append(errs, checkNamed(spec.Child("matchConditions").Index(i), conds[i].Name, conds[i].Expression, names)...)
		accessors[i] = (*matchconditions.MatchCondition)(&conds[i])
	}
	eval := compiler.CompileCondition(accessors, decls, compileMode)
	// CompilationErrors has one entry per failing condition, in order, without its index:
	// compile them one by one again only to name the field.
	if len(eval.CompilationErrors()) > 0 {
		for i := range conds {
			if conds[i].Expression == "" {
				continue
			}
			res := compiler.CompileCELExpression(accessors[i], decls, compileMode)
			if res.Error != nil {
				errs = append(errs, field.Invalid(spec.Child("matchConditions").Index(i).Child("expression"), conds[i].Expression, res.Error.Detail))
			}
		}
	}
	failurePolicy := out.failurePolicy
	out.matcher = matchconditions.NewMatcher(eval, &failurePolicy, "policy", "mutate", p.Name)
	return errs
}

// compileMutations checks spec.mutations (at least one) and compiles each into out.mutations,
// returning the problems.
func (out *Policy) compileMutations(compiler *plugincel.CompositedCompiler, mutations []admissionregistrationv1.Mutation, spec *field.Path, decls plugincel.OptionalVariableDeclarations) field.ErrorList {
	var errs field.ErrorList
	if len(mutations) == 0 {
		errs = append(errs, field.Required(spec.Child("mutations"), "at least one mutation"))
	}
	decls.HasPatchTypes = true // a copy: the variables and matchConditions had none
	for i, m := range mutations {
		errs = append(errs, out.compileMutation(compiler, m, spec.Child("mutations").Index(i), decls)...)
	}
	return errs
}

// compileMutation compiles the mutation m at path into a patcher added to out.mutations (none
// when m is refused before its expression compiles), returning the problems.
func (out *Policy) compileMutation(compiler *plugincel.CompositedCompiler, m admissionregistrationv1.Mutation, path *field.Path, decls plugincel.OptionalVariableDeclarations) field.ErrorList {
	accessor, exprPath, errs := out.mutationExpression(m, path)
	if accessor == nil {
		return errs
	}
	expression := accessor.GetExpression()
	if expression == "" {
		return append(errs, field.Required(exprPath, ""))
	}
	eval := compiler.CompileMutatingEvaluator(accessor, decls, compileMode)
	for _, err := range eval.CompilationErrors() {
		errs = append(errs, field.Invalid(exprPath, expression, celDetail(err)))
	}
	if m.PatchType == admissionregistrationv1.PatchTypeJSONPatch {
		out.mutations = append(out.mutations, patch.NewJSONPatcher(eval))
	} else {
		out.mutations = append(out.mutations, patch.NewApplyConfigurationPatcher(eval))
	}
	return errs
}

// mutationExpression returns the expression of the mutation m at path, as the accessor the
// compiler takes, and the path of its field; a nil accessor when m has none of its patchType
// or an unknown patchType. An ApplyConfiguration marks out.applyConfig and is refused on the
// custom resources out selects.
func (out *Policy) mutationExpression(m admissionregistrationv1.Mutation, path *field.Path) (plugincel.ExpressionAccessor, *field.Path, field.ErrorList) {
	switch m.PatchType {
	case admissionregistrationv1.PatchTypeJSONPatch:
		errs := checkPatchFields(path, m.PatchType, "jsonPatch", m.JSONPatch != nil, "applyConfiguration", m.ApplyConfiguration != nil)
		if m.JSONPatch == nil {
			return nil, nil, errs
		}
		return &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, path.Child("jsonPatch", "expression"), errs
	case admissionregistrationv1.PatchTypeApplyConfiguration:
		errs := checkPatchFields(path, m.PatchType, "applyConfiguration", m.ApplyConfiguration != nil, "jsonPatch", m.JSONPatch != nil)
		if m.ApplyConfiguration == nil {
			return nil, nil, errs
		}
		out.applyConfig = true
		for _, gvk := range out.kinds {
			if !out.targets[gvk].typed {
				errs = append(errs, field.Forbidden(path.Child("patchType"), fmt.Sprintf(
					"ApplyConfiguration needs the schema of the kind, which synchook does not have for the custom resource %s; use JSONPatch", gvk)))
			}
		}
		return &patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, path.Child("applyConfiguration", "expression"), errs
	default:
		return nil, nil, field.ErrorList{field.NotSupported(path.Child("patchType"), m.PatchType, []string{
			string(admissionregistrationv1.PatchTypeApplyConfiguration), string(admissionregistrationv1.PatchTypeJSONPatch),
		})}
	}
}

// checkPatchFields returns the problems of the mutation at path whose patchType t needs the
// field want (set says it is there) and forbids the field other (otherSet).
func checkPatchFields(path *field.Path, t admissionregistrationv1.PatchType, want string, set bool, other string, otherSet bool) field.ErrorList {
	var errs field.ErrorList
	if otherSet {
		errs = append(errs, field.Forbidden(path.Child(other), "must not be set when patchType is "+string(t)))
	}
	if !set {
		errs = append(errs, field.Required(path.Child(want), "must be set when patchType is "+string(t)))
	}
	return errs
}

// celDetail returns the message of a CEL compilation error without its type prefix.
func celDetail(err error) string {
	var ce *apiservercel.Error
	if errors.As(err, &ce) {
		return ce.Detail
	}
	return err.Error()
}

// selectorOf returns the label selector ls, found at p, as a labels.Selector: nil when ls is
// nil or selects everything.
func selectorOf(ls *metav1.LabelSelector, p *field.Path) (labels.Selector, *field.Error) {
	if ls == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, field.Invalid(p, ls, err.Error())
	}
	if sel.Empty() {
		return nil, nil
	}
	return sel, nil
}

// resolve checks matchConstraints and resolves its resource rules to the kinds of out.scheme
// and of custom (resolveMatch), filling out.matchResources, out.targets and out.kinds.
func (out *Policy) resolve(mc *admissionregistrationv1.MatchResources, path *field.Path, custom []schema.GroupVersionKind) field.ErrorList {
	if mc == nil {
		return field.ErrorList{field.Required(path, "the resource rules say which kinds and operations the policy handles")}
	}
	idx := newKindIndex(out.scheme, custom)
	var errs field.ErrorList
	out.matchResources, errs = resolveMatch(mc, path, idx)
	out.targets = map[schema.GroupVersionKind]*target{}
	if len(mc.ResourceRules) == 0 {
		errs = append(errs, field.Required(path.Child("resourceRules"), ""))
	}
	for _, rr := range out.includes {
		for _, gvk := range sortedKinds(rr.kinds) {
			t := out.targets[gvk]
			if t == nil {
				e := idx.kinds[gvk]
				t = &target{gvr: e.gvr, typed: e.typed}
				out.targets[gvk] = t
				out.kinds = append(out.kinds, gvk)
			}
			t.rules = append(t.rules, rr)
		}
	}
	return errs
}

// kindEntry is a kind a rule can select.
type kindEntry struct {
	gvr   schema.GroupVersionResource
	typed bool
}

// kindIndex holds the kinds rules can select, by GVK and by group/version/plural.
type kindIndex struct {
	kinds map[schema.GroupVersionKind]kindEntry
	byGVR map[schema.GroupVersionResource][]schema.GroupVersionKind
}

// newKindIndex indexes the object kinds of scheme (not lists, not internal versions) and the
// custom kinds.
func newKindIndex(scheme *runtime.Scheme, custom []schema.GroupVersionKind) *kindIndex {
	idx := &kindIndex{kinds: map[schema.GroupVersionKind]kindEntry{}, byGVR: map[schema.GroupVersionResource][]schema.GroupVersionKind{}}
	add := func(gvk schema.GroupVersionKind, typed bool) {
		if _, ok := idx.kinds[gvk]; ok {
			return
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		idx.kinds[gvk] = kindEntry{gvr: gvr, typed: typed}
		idx.byGVR[gvr] = append(idx.byGVR[gvr], gvk)
	}
	objectType := reflect.TypeFor[metav1.Object]()
	for gvk, t := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") || !reflect.PointerTo(t).Implements(objectType) {
			continue
		}
		add(gvk, true)
	}
	for _, gvk := range custom {
		if !scheme.Recognizes(gvk) {
			add(gvk, false)
		}
	}
	for _, gvks := range idx.byGVR {
		slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	}
	return idx
}

// resolve checks rule r and returns it with the kinds it selects. For an include rule
// (include), a resource that selects no kind is an error.
func (idx *kindIndex) resolve(r admissionregistrationv1.NamedRuleWithOperations, path *field.Path, include bool) (resolvedRule, field.ErrorList) {
	var errs field.ErrorList
	rr := resolvedRule{rule: r, kinds: sets.New[schema.GroupVersionKind]()}
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(path.Child("operations"), ""))
	}
	for j, op := range r.Operations {
		switch op {
		case admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete,
			admissionregistrationv1.Connect, admissionregistrationv1.OperationAll:
		default:
			errs = append(errs, field.NotSupported(path.Child("operations").Index(j), op, []string{"CREATE", "UPDATE", "DELETE", "CONNECT", "*"}))
		}
	}
	if s := r.Scope; s != nil && *s != admissionregistrationv1.AllScopes && *s != admissionregistrationv1.NamespacedScope && *s != admissionregistrationv1.ClusterScope {
		errs = append(errs, field.NotSupported(path.Child("scope"), *s, []string{"*", "Namespaced", "Cluster"}))
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(path.Child("apiGroups"), ""))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(path.Child("apiVersions"), ""))
	}
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(path.Child("resources"), ""))
	}
	for j, res := range r.Resources {
		rpath := path.Child("resources").Index(j)
		switch {
		case res == "*" || strings.HasPrefix(res, "*/"):
			errs = append(errs, field.Forbidden(rpath, "synchook registers a hook per kind: list the resources (e.g. pods) instead of *"))
			continue
		case strings.Contains(res, "/"):
			errs = append(errs, field.Forbidden(rpath, "synchook hooks see whole objects, not subresources"))
			continue
		}
		n := 0
		for gvr, gvks := range idx.byGVR {
			if gvr.Resource != res || !matchesAny(r.APIGroups, gvr.Group) || !matchesAny(r.APIVersions, gvr.Version) {
				continue
			}
			rr.kinds.Insert(gvks...)
			n++
		}
		if n == 0 && include {
			errs = append(errs, field.Invalid(rpath, res, fmt.Sprintf(
				"no kind of apiGroups %q, apiVersions %q has the resource %q: the scheme does not know it; for a custom resource give its kind (policy.Options.Kinds)",
				r.APIGroups, r.APIVersions, res)))
		}
	}
	return rr, errs
}

// sortedKinds returns the kinds of s sorted by their string form.
func sortedKinds(s sets.Set[schema.GroupVersionKind]) []schema.GroupVersionKind {
	out := s.UnsortedList()
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// matchesAny reports whether list holds s or "*".
func matchesAny(list []string, s string) bool {
	return slices.Contains(list, s) || slices.Contains(list, "*")
}

// Name returns metadata.name of the policy.
func (p *Policy) Name() string { return p.name }

// Resources returns the kinds the policy's resource rules select, in the order the rules name
// them (each once): the typed kinds of the scheme and the custom kinds of Options.Kinds.
// The config registers one hook per kind.
func (p *Policy) Resources() []schema.GroupVersionKind { return slices.Clone(p.kinds) }

// Operations returns the operations the resource rules list for the kind gvk (nil when the
// policy does not select gvk), "*" expanded to CREATE, UPDATE, DELETE and CONNECT, in that
// order.
func (p *Policy) Operations(gvk schema.GroupVersionKind) []admissionregistrationv1.OperationType {
	t := p.targets[gvk]
	if t == nil {
		return nil
	}
	var out []admissionregistrationv1.OperationType
	for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete, admissionregistrationv1.Connect} {
		for _, rr := range t.rules {
			if slices.Contains(rr.rule.Operations, op) || slices.Contains(rr.rule.Operations, admissionregistrationv1.OperationAll) {
				out = append(out, op)
				break
			}
		}
	}
	return out
}

// HookTypes returns the hook types that can run the policy on the kind gvk, in
// hooks.AllHookTypes order: Create* for CREATE, Update* for UPDATE, Delete* for DELETE, and
// Get* when any operation is listed. Nil when the policy does not select gvk.
func (p *Policy) HookTypes(gvk schema.GroupVersionKind) []hooks.HookType {
	ops := p.Operations(gvk)
	if len(ops) == 0 {
		return nil
	}
	var out []hooks.HookType
	for _, t := range hooks.AllHookTypes() {
		if op := ruleOperationOf(t); op == "" || slices.Contains(ops, op) {
			out = append(out, t)
		}
	}
	return out
}

// variable is a spec.variables entry as the CEL compiler wants it.
type variable struct{ name, expression string }

func (v *variable) GetName() string       { return v.name }
func (v *variable) GetExpression() string { return v.expression }

// ReturnTypes allows any type, as the apiserver does for variables.
func (v *variable) ReturnTypes() []*celgo.Type { return []*celgo.Type{celgo.AnyType, celgo.DynType} }
