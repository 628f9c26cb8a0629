package cleanup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/undo"
)

// Defaults of Options.
const (
	// DefaultAttempts is Options.Attempts' default.
	DefaultAttempts = 5
	// DefaultPageSize is Options.PageSize's default.
	DefaultPageSize = 500
)

// ErrOptions is the cause of Run's error when Options are incomplete or invalid.
var ErrOptions = errors.New("invalid cleanup options")

// Options configures Run.
type Options struct {
	// Client lists, gets and updates the host objects (required): a client of the host cluster
	// that handles *unstructured.Unstructured of every kind of Kinds (controller-runtime's
	// client.New does).
	Client client.Client
	// Namespace is the vcluster's host namespace (required).
	Namespace string
	// Kinds are the kinds whose objects are cleaned, in this order (required; Kinds gives the
	// usual list). A kind the cluster does not serve is skipped with a line on Progress.
	Kinds []schema.GroupVersionKind
	// Ring opens sealed undos. Nil: none opens (reason undo.ReasonNoKey), the hooks' changes
	// under them stay, and the annotations are removed all the same.
	Ring *undo.Ring
	// DryRun computes and reports what a run would write, and writes nothing.
	DryRun bool
	// Progress receives the report, one line per object cleaned (or failed) plus indented
	// lines for what was left as the hooks wrote it. Default io.Discard.
	Progress io.Writer
	// Attempts bounds the Updates of one object: each Conflict (someone else wrote it
	// meanwhile) makes Run read the object again and recompute, until this many Updates
	// failed. Default DefaultAttempts.
	Attempts int
	// PageSize is the limit of each List request. Default DefaultPageSize.
	PageSize int64
}

// setDefaults fills in the zero fields that have a default.
func (o *Options) setDefaults() {
	o.Progress = cmp.Or(o.Progress, io.Discard)
	o.Attempts = cmp.Or(max(o.Attempts, 0), DefaultAttempts)
	o.PageSize = cmp.Or(max(o.PageSize, 0), DefaultPageSize)
}

// validate returns an error wrapping ErrOptions when a required field is missing.
func (o *Options) validate() error {
	switch {
	case o.Client == nil:
		return fmt.Errorf("%w: no client", ErrOptions)
	case o.Namespace == "":
		return fmt.Errorf("%w: no namespace", ErrOptions)
	case len(o.Kinds) == 0:
		return fmt.Errorf("%w: no kinds", ErrOptions)
	}
	for _, gvk := range o.Kinds {
		if gvk.Version == "" || gvk.Kind == "" {
			return fmt.Errorf("%w: kind %q needs a version and a Kind", ErrOptions, KindString(gvk))
		}
	}
	return nil
}

// Summary counts what Run did.
type Summary struct {
	// DryRun is Options.DryRun: the counts are what a run would do (the apiserver is not
	// asked, so Refused stays 0).
	DryRun bool
	// Scanned is the number of objects listed (seen).
	Scanned int
	// Cleaned is the number of objects written back without synchook.io/* annotations,
	// Refused included.
	Cleaned int
	// Unchanged is the number of objects that needed no write: no synchook.io/* annotation
	// (any more), or deleted meanwhile.
	Unchanged int
	// UndosApplied is the number of Cleaned objects whose undo was applied (as far as an
	// update may change the object back: see Unrestored).
	UndosApplied int
	// Unrestored is the number of undo entries left as the hooks wrote them, on all objects:
	// the JSON Pointers an update cannot change back (a Pod's tolerations, …).
	Unrestored int
	// NotApplied is the number of undos not applied at all: clear text (a tenant may have
	// written it), one that does not open with the key, no key, malformed, … (the reasons of
	// undo.Rule.Cleanup's Dropped). Their hooks' changes stay.
	NotApplied int
	// Refused is the number of objects whose restored version the apiserver refused as invalid
	// (422 Invalid, 400 BadRequest): Run wrote them again with only their synchook.io/*
	// annotations removed, so their undo was not applied and the hooks' changes stay.
	Refused int
	// Failed is the number of objects that could not be cleaned: they still carry their
	// synchook.io/* annotations.
	Failed int
	// KindsFailed is the number of kinds whose List failed: their objects were not scanned.
	KindsFailed int
	// KindsSkipped is the number of kinds the cluster does not serve.
	KindsSkipped int
}

// OK reports whether every object of every served kind was cleaned or needed no write: no
// synchook.io/* annotation is left on them.
func (s Summary) OK() bool { return s.Failed == 0 && s.KindsFailed == 0 }

// Left reports whether some change of the hooks stays on a cleaned object: an entry left
// unrestored, an undo not applied, or an object whose restored version was refused.
func (s Summary) Left() bool { return s.Unrestored > 0 || s.NotApplied > 0 || s.Refused > 0 }

// String returns the one-line summary: "12 objects seen: 5 cleaned, 2 undos applied, 1 entry
// left unrestored, 2 undos not applied, 1 object refused (annotations removed only),
// 7 unchanged, 0 failed", with the failed and skipped kinds when there are any ("to clean"
// and a note in a dry run).
func (s Summary) String() string {
	cleaned, applied := "cleaned", "applied"
	if s.DryRun {
		cleaned, applied = "to clean", "to apply"
	}
	out := fmt.Sprintf("%s seen: %d %s, %s %s, %s left unrestored, %s not applied, %s refused (annotations removed only), %d unchanged, %d failed",
		count(s.Scanned, "object"), s.Cleaned, cleaned, count(s.UndosApplied, "undo"), applied,
		count(s.Unrestored, "entry"), count(s.NotApplied, "undo"), count(s.Refused, "object"), s.Unchanged, s.Failed)
	if s.KindsFailed > 0 {
		out += fmt.Sprintf("; %s could not be listed", count(s.KindsFailed, "kind"))
	}
	if s.KindsSkipped > 0 {
		out += fmt.Sprintf("; %s not served by the cluster", count(s.KindsSkipped, "kind"))
	}
	if s.DryRun {
		out += " (dry run: nothing written)"
	}
	return out
}

// count returns "1 entry", "2 entries", "0 objects".
func count(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "y"):
		return fmt.Sprintf("%d %sies", n, noun[:len(noun)-1])
	default:
		return fmt.Sprintf("%d %ss", n, noun)
	}
}

// DefaultKinds returns the kinds a vcluster syncer writes to its host namespace in every
// vcluster: v1 Pod, Service, Secret and ConfigMap.
func DefaultKinds() []schema.GroupVersionKind {
	v1 := schema.GroupVersion{Version: "v1"}
	return []schema.GroupVersionKind{v1.WithKind("Pod"), v1.WithKind("Service"), v1.WithKind("Secret"), v1.WithKind("ConfigMap")}
}

// Kinds returns DefaultKinds followed by the host (undo.Physical) kinds of sealed (the kinds
// the key Secret lists) that are not among them, in sealed's order. Virtual kinds are left
// out: their objects live in the virtual cluster.
func Kinds(sealed []undo.Kind) []schema.GroupVersionKind {
	out := DefaultKinds()
	for _, k := range sealed {
		if k.Side == undo.Physical && !slices.Contains(out, k.GVK) {
			out = append(out, k.GVK)
		}
	}
	return out
}

// ParseKinds parses a comma-separated list of kinds written "<group/version>/<Kind>" ("v1/Pod",
// "apps/v1/Deployment"); spaces around an item and empty items are ignored, a kind given twice
// counts once. Errors: an item without a version or a Kind.
func ParseKinds(s string) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, '/')
		if i <= 0 || i == len(item)-1 {
			return nil, fmt.Errorf("kind %q: want <group/version>/<Kind>, e.g. v1/Pod or apps/v1/Deployment", item)
		}
		gv, err := schema.ParseGroupVersion(item[:i])
		if err != nil || gv.Version == "" {
			return nil, fmt.Errorf("kind %q: want <group/version>/<Kind>, e.g. v1/Pod or apps/v1/Deployment", item)
		}
		if gvk := gv.WithKind(item[i+1:]); !slices.Contains(out, gvk) {
			out = append(out, gvk)
		}
	}
	return out, nil
}

// KindString returns gvk as ParseKinds reads it: "v1/Pod", "apps/v1/Deployment".
func KindString(gvk schema.GroupVersionKind) string {
	return gvk.GroupVersion().String() + "/" + gvk.Kind
}

// Run cleans every object of opts.Kinds in opts.Namespace that carries a synchook.io/*
// annotation (see the package documentation), reporting on opts.Progress, and returns the
// counts. An object that fails is counted (Summary.Failed) and the run goes on; the error is
// for the run as a whole: one wrapping ErrOptions, or ctx's when it ended (the summary then
// counts what was done so far).
func Run(ctx context.Context, opts Options) (Summary, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return Summary{}, err
	}
	r := &runner{
		opts: opts,
		rule: undo.Rule{Ring: opts.Ring, MaxBytes: undo.DefaultMaxBytes}, // the hooks gone: no Rewriters
		sum:  Summary{DryRun: opts.DryRun},
	}
	var todo []*unstructured.Unstructured
	for _, gvk := range opts.Kinds {
		found, err := r.list(ctx, gvk)
		if ctx.Err() != nil {
			return r.sum, ctx.Err()
		}
		if err != nil {
			continue // counted and reported by list
		}
		todo = append(todo, found...)
	}
	for i, obj := range todo {
		if err := ctx.Err(); err != nil {
			return r.sum, err
		}
		r.clean(ctx, obj, i+1, len(todo))
	}
	return r.sum, ctx.Err()
}

// runner is one Run.
type runner struct {
	opts Options
	rule undo.Rule
	sum  Summary
}

// printf writes one line of the report.
func (r *runner) printf(format string, a ...any) {
	_, _ = fmt.Fprintf(r.opts.Progress, format+"\n", a...)
}

// list returns the objects of kind gvk in the namespace that carry a synchook.io/*
// annotation, counting the others as unchanged. A kind the cluster does not serve gives no
// objects and no error; a failed List is reported, counted and returned.
func (r *runner) list(ctx context.Context, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	var found []*unstructured.Unstructured
	cont := ""
	for {
		page := &unstructured.UnstructuredList{}
		page.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := r.opts.Client.List(ctx, page, client.InNamespace(r.opts.Namespace), client.Limit(r.opts.PageSize), client.Continue(cont))
		switch {
		case err != nil && meta.IsNoMatchError(err):
			r.sum.KindsSkipped++
			r.printf("skipped %s: the cluster does not serve this kind", KindString(gvk))
			return nil, nil
		case err != nil:
			r.sum.KindsFailed++
			r.printf("FAILED to list %s in %s: %s", KindString(gvk), r.opts.Namespace, describeError(err))
			return nil, err
		}
		for i := range page.Items {
			obj := &page.Items[i]
			obj.SetGroupVersionKind(gvk) // list items may come without apiVersion and kind
			r.sum.Scanned++
			if hasReserved(obj) {
				found = append(found, obj)
			} else {
				r.sum.Unchanged++
			}
		}
		if cont = page.GetContinue(); cont == "" {
			return found, nil
		}
	}
}

// hasReserved reports whether obj carries an annotation with undo.ReservedPrefix.
func hasReserved(obj *unstructured.Unstructured) bool {
	for k := range obj.GetAnnotations() {
		if strings.HasPrefix(k, undo.ReservedPrefix) {
			return true
		}
	}
	return false
}

// clean cleans obj, the n-th of total, and counts and reports the outcome. Every string of
// the report that comes from the object's annotations (its undo's JSON Pointers) is quoted
// (quote), and names are quoted unless they are plain (plainName): a tenant's text never
// starts a report line or writes a control character to the terminal.
func (r *runner) clean(ctx context.Context, obj *unstructured.Unstructured, n, total int) {
	gvk := obj.GroupVersionKind()
	what := fmt.Sprintf("%d/%d %s %s/%s", n, total, KindString(gvk), plainName(obj.GetNamespace()), plainName(obj.GetName()))
	hadUndo := hasUndo(obj)
	out, err := r.cleanObject(ctx, obj)
	res := out.CleanupResult
	switch {
	case errors.Is(err, errGone):
		r.sum.Unchanged++
		r.printf("gone %s (deleted meanwhile)", what)
		return
	case err != nil:
		r.sum.Failed++
		r.printf("FAILED %s: %s", what, describeError(err))
		return
	case out.refused != nil:
		r.sum.Cleaned++
		r.sum.Refused++
		r.printf("refused %s: the apiserver refused the restored object: %s", what, describeError(out.refused))
		r.printf("  undo not applied (refused): only synchook's annotations were removed; the hooks' changes stay")
	case res.Object == nil:
		r.sum.Unchanged++
		r.printf("already clean %s", what)
		return
	case r.opts.DryRun:
		r.sum.Cleaned++
		r.printf("would clean %s", what)
	default:
		r.sum.Cleaned++
		r.printf("cleaned %s", what)
	}
	if hadUndo && res.Dropped == "" && out.refused == nil {
		r.sum.UndosApplied++
	}
	if res.Dropped != "" {
		r.sum.NotApplied++
		r.printf("  undo not applied (%s): %s; the hooks' changes stay", plainName(res.Dropped), droppedText(res.Dropped))
	}
	r.sum.Unrestored += len(res.Unrestored)
	for _, p := range res.Unrestored {
		r.printf("  not restorable (an update cannot change it back): %s", quote(p))
	}
}

// hasUndo reports whether obj carries an undo.Annotation.
func hasUndo(obj *unstructured.Unstructured) bool {
	_, ok := obj.GetAnnotations()[undo.Annotation]
	return ok
}

// errGone says the object was deleted while Run worked on it.
var errGone = errors.New("object deleted meanwhile")

// outcome is what cleanObject did to one object.
type outcome struct {
	undo.CleanupResult
	// refused is the apiserver's answer to the restored object when it refused it as invalid
	// (refusedAsInvalid) and only the synchook.io/* annotations were removed instead; nil
	// otherwise.
	refused error
}

// cleanObject computes obj's cleanup and, unless DryRun, writes it by Update with obj's
// resourceVersion; on a Conflict it reads the object again and starts over, up to Attempts
// Updates. When the apiserver refuses the restored object as invalid (a value of the undo it
// does not accept), it removes only the synchook.io/* annotations from the object read again
// (dropReserved) and says so in the outcome. The result's Object is nil when there was nothing
// to write.
func (r *runner) cleanObject(ctx context.Context, obj *unstructured.Unstructured) (outcome, error) {
	gvk := obj.GroupVersionKind()
	for attempt := 1; ; attempt++ {
		raw, err := obj.MarshalJSON()
		if err != nil {
			return outcome{}, fmt.Errorf("encode: %w", err)
		}
		res, err := r.rule.Cleanup(ctx, gvk, undo.Physical, raw)
		if err != nil || res.Object == nil || r.opts.DryRun {
			return outcome{CleanupResult: res}, err
		}
		out := &unstructured.Unstructured{}
		if err := out.UnmarshalJSON(res.Object); err != nil {
			return outcome{}, fmt.Errorf("decode the cleaned object: %w", err)
		}
		out.SetResourceVersion(obj.GetResourceVersion()) // optimistic concurrency, always
		err = r.opts.Client.Update(ctx, out)
		switch {
		case err == nil:
			return outcome{CleanupResult: res}, nil
		case apierrors.IsNotFound(err):
			return outcome{}, errGone
		case refusedAsInvalid(err):
			if dropErr := r.dropReserved(ctx, gvk, client.ObjectKeyFromObject(obj), err); dropErr != nil {
				return outcome{}, dropErr
			}
			return outcome{CleanupResult: res, refused: err}, nil
		case !apierrors.IsConflict(err):
			return outcome{}, fmt.Errorf("update: %w", err)
		case attempt >= r.opts.Attempts:
			return outcome{}, fmt.Errorf("update: still a conflict after %d attempts: %w", attempt, err)
		}
		if obj, err = r.get(ctx, gvk, client.ObjectKeyFromObject(obj)); err != nil {
			return outcome{}, fmt.Errorf("read again after a conflict: %w", err)
		}
	}
}

// refusedAsInvalid reports whether err is the apiserver refusing an object's content: 422
// Invalid (a label value, an immutable field, …) or 400 BadRequest (a value it cannot decode).
// Writing the same content again would be refused again, on every run.
func refusedAsInvalid(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// dropReserved is the fallback when the apiserver refused the restored object (refusal): it
// reads the object again and writes it back with only its synchook.io/* annotations removed,
// with the resourceVersion it read; on a Conflict it reads it again, up to Attempts Updates.
// The hooks' changes stay. errGone when the object was deleted meanwhile.
func (r *runner) dropReserved(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey, refusal error) error {
	for attempt := 1; ; attempt++ {
		obj, err := r.get(ctx, gvk, key)
		if err != nil {
			return fmt.Errorf("read again after the apiserver refused the restored object (%s): %w", describeError(refusal), err)
		}
		annotations := obj.GetAnnotations()
		n := len(annotations)
		maps.DeleteFunc(annotations, func(k, _ string) bool { return strings.HasPrefix(k, undo.ReservedPrefix) })
		if len(annotations) == n {
			return nil // someone else removed them meanwhile
		}
		obj.SetAnnotations(annotations)
		err = r.opts.Client.Update(ctx, obj)
		switch {
		case err == nil:
			return nil
		case apierrors.IsNotFound(err):
			return errGone
		case !apierrors.IsConflict(err):
			return fmt.Errorf("the apiserver refused the restored object (%s), and removing only synchook's annotations: update: %w", describeError(refusal), err)
		case attempt >= r.opts.Attempts:
			return fmt.Errorf("the apiserver refused the restored object (%s), and removing only synchook's annotations: update: still a conflict after %d attempts: %w", describeError(refusal), attempt, err)
		}
	}
}

// get reads the object key of kind gvk; errGone when it does not exist.
func (r *runner) get(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err := r.opts.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return nil, errGone
	}
	return obj, err
}

// droppedText explains a reason of undo.Rule.Cleanup's Dropped.
func droppedText(reason string) string {
	switch reason {
	case undo.ReasonNoKey:
		return "it is sealed and no undo key was given"
	case undo.ReasonUnauthentic:
		return "it does not open with the undo key for this object (forged, copied from another object, or sealed with a key not in the ring)"
	case undo.ReasonMalformed:
		return "it is not a valid undo"
	case undo.ReasonClearText:
		return "it is not sealed: a tenant could have written it (or a build before sealing was required did)"
	case undo.ReasonTooLarge:
		return "it is larger than synchook ever writes"
	case undo.ReasonIdentity:
		return "it would change the object's identity"
	default:
		return "it cannot be applied"
	}
}

// describeError returns err for the report without object data: for an API error only its
// reason, code and the field paths and types of its causes (an apiserver message may quote
// field values, e.g. a Pod update's spec diff), each field path quoted (it may hold a map key
// the tenant chose: "data[key]"); other errors as they are, with control characters escaped
// (escapeControls).
func describeError(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return escapeControls(err.Error())
	}
	st := status.Status()
	reason := cmp.Or(string(st.Reason), "error")
	out := fmt.Sprintf("%s (%d)", plainName(reason), st.Code)
	if st.Details != nil {
		var causes []string
		for _, c := range st.Details.Causes {
			if c.Field != "" {
				causes = append(causes, quote(c.Field)+": "+plainName(string(c.Type)))
			}
		}
		if len(causes) > 0 {
			out += "; " + strings.Join(causes, ", ")
		}
	}
	// Keep the context Run wrapped around the API error ("update: …"), not the error's text.
	if statusErr, ok := status.(error); ok {
		if prefix, _, found := strings.Cut(err.Error(), ": "+statusErr.Error()); found {
			out = escapeControls(prefix) + ": " + out
		}
	}
	return out
}

// quote returns s, a string from an object (an undo's JSON Pointer, a field path), quoted for
// the report in Go syntax with every byte outside printable ASCII escaped: a newline, an ANSI
// escape sequence or a bidi control in it can neither start a report line nor act on the
// terminal.
func quote(s string) string { return strconv.QuoteToASCII(s) }

// nameChar reports whether c may appear in a Kubernetes name as plainName prints it.
func nameChar(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == ':'
}

// plainName returns name (an object's name, a reason or a type name) as it is when it holds
// only the characters of a Kubernetes name (letters, digits, '-', '.', '_', ':'), else quoted
// (quote).
func plainName(name string) string {
	if name == "" || strings.IndexFunc(name, func(c rune) bool { return !nameChar(c) }) >= 0 {
		return quote(name)
	}
	return name
}

// escapeControls returns s, an error text, with every control character, every other
// non-printable rune (strconv.IsPrint) and every invalid byte escaped as strconv.Quote writes
// them (\n, \x1b, \u202e, \xff), and the rest as it is.
func escapeControls(s string) string {
	var b strings.Builder
	for i, c := range s {
		if _, size := utf8.DecodeRuneInString(s[i:]); c == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
			continue
		}
		if strconv.IsPrint(c) {
			b.WriteRune(c)
			continue
		}
		q := strconv.QuoteRuneToASCII(c)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
