package cleanup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/engine"
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
	// Ring opens sealed undos. Nil: none opens (reason engine.UndoNoKey), the hooks' changes
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
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
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
	// DryRun is Options.DryRun: Cleaned counts the objects a run would write.
	DryRun bool
	// Scanned is the number of objects listed.
	Scanned int
	// Cleaned is the number of objects written back without synchook.io/* annotations.
	Cleaned int
	// Unchanged is the number of objects that needed no write: no synchook.io/* annotation
	// (any more), or deleted meanwhile.
	Unchanged int
	// FieldsLeft is the number of Cleaned objects on which some change of the hooks stays: an
	// Unrestored path, or an undo not applied (Dropped).
	FieldsLeft int
	// Failed is the number of objects that could not be cleaned.
	Failed int
	// KindsFailed is the number of kinds whose List failed: their objects were not scanned.
	KindsFailed int
	// KindsSkipped is the number of kinds the cluster does not serve.
	KindsSkipped int
}

// OK reports whether every object of every served kind was cleaned or needed no write.
func (s Summary) OK() bool { return s.Failed == 0 && s.KindsFailed == 0 }

// String returns the one-line summary: "12 objects scanned: 5 cleaned (2 with fields left),
// 7 unchanged, 0 failed", with the failed and skipped kinds when there are any ("to clean"
// and a note in a dry run).
func (s Summary) String() string {
	cleaned := "cleaned"
	if s.DryRun {
		cleaned = "to clean"
	}
	out := fmt.Sprintf("%d objects scanned: %d %s (%d with fields left), %d unchanged, %d failed",
		s.Scanned, s.Cleaned, cleaned, s.FieldsLeft, s.Unchanged, s.Failed)
	if s.KindsFailed > 0 {
		out += fmt.Sprintf("; %d kinds could not be listed", s.KindsFailed)
	}
	if s.KindsSkipped > 0 {
		out += fmt.Sprintf("; %d kinds not served by the cluster", s.KindsSkipped)
	}
	if s.DryRun {
		out += " (dry run: nothing written)"
	}
	return out
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
		reg:  engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(opts.Ring)}),
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
	reg  *engine.Registry
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

// hasReserved reports whether obj carries an annotation with engine.ReservedPrefix.
func hasReserved(obj *unstructured.Unstructured) bool {
	for k := range obj.GetAnnotations() {
		if strings.HasPrefix(k, engine.ReservedPrefix) {
			return true
		}
	}
	return false
}

// clean cleans obj, the n-th of total, and counts and reports the outcome.
func (r *runner) clean(ctx context.Context, obj *unstructured.Unstructured, n, total int) {
	gvk := obj.GroupVersionKind()
	what := fmt.Sprintf("%d/%d %s %s/%s", n, total, KindString(gvk), obj.GetNamespace(), obj.GetName())
	res, err := r.cleanObject(ctx, obj)
	switch {
	case errors.Is(err, errGone):
		r.sum.Unchanged++
		r.printf("gone %s (deleted meanwhile)", what)
		return
	case err != nil:
		r.sum.Failed++
		r.printf("FAILED %s: %s", what, describeError(err))
		return
	case res.Object == nil:
		r.sum.Unchanged++
		r.printf("already clean %s", what)
		return
	}
	r.sum.Cleaned++
	if r.opts.DryRun {
		r.printf("would clean %s", what)
	} else {
		r.printf("cleaned %s", what)
	}
	if len(res.Unrestored) > 0 || res.Dropped != "" {
		r.sum.FieldsLeft++
	}
	if res.Dropped != "" {
		r.printf("  undo not applied (%s): %s; the hooks' changes stay", res.Dropped, droppedText(res.Dropped))
	}
	for _, p := range res.Unrestored {
		r.printf("  not restorable (an update cannot change it back): %s", p)
	}
}

// errGone says the object was deleted while Run worked on it.
var errGone = errors.New("object deleted meanwhile")

// cleanObject computes obj's cleanup and, unless DryRun, writes it by Update with obj's
// resourceVersion; on a Conflict it reads the object again and starts over, up to Attempts
// Updates. The result's Object is nil when there was nothing to write.
func (r *runner) cleanObject(ctx context.Context, obj *unstructured.Unstructured) (engine.CleanupResult, error) {
	gvk := obj.GroupVersionKind()
	for attempt := 1; ; attempt++ {
		raw, err := obj.MarshalJSON()
		if err != nil {
			return engine.CleanupResult{}, fmt.Errorf("encode: %w", err)
		}
		res, err := r.reg.Cleanup(ctx, gvk, undo.Physical, raw)
		if err != nil || res.Object == nil || r.opts.DryRun {
			return res, err
		}
		out := &unstructured.Unstructured{}
		if err := out.UnmarshalJSON(res.Object); err != nil {
			return engine.CleanupResult{}, fmt.Errorf("decode the cleaned object: %w", err)
		}
		out.SetResourceVersion(obj.GetResourceVersion()) // optimistic concurrency, always
		err = r.opts.Client.Update(ctx, out)
		switch {
		case err == nil:
			return res, nil
		case apierrors.IsNotFound(err):
			return engine.CleanupResult{}, errGone
		case !apierrors.IsConflict(err):
			return engine.CleanupResult{}, fmt.Errorf("update: %w", err)
		case attempt >= r.opts.Attempts:
			return engine.CleanupResult{}, fmt.Errorf("update: still a conflict after %d attempts: %w", attempt, err)
		}
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(gvk)
		if err := r.opts.Client.Get(ctx, client.ObjectKeyFromObject(obj), fresh); apierrors.IsNotFound(err) {
			return engine.CleanupResult{}, errGone
		} else if err != nil {
			return engine.CleanupResult{}, fmt.Errorf("read again after a conflict: %w", err)
		}
		obj = fresh
	}
}

// droppedText explains a reason of engine.Registry.Cleanup's Dropped.
func droppedText(reason string) string {
	switch reason {
	case engine.UndoNoKey:
		return "it is sealed and no undo key was given"
	case engine.UndoUnauthentic:
		return "it does not open with the undo key for this object (forged, copied from another object, or sealed with a key not in the ring)"
	case engine.UndoMalformed:
		return "it is not a valid undo"
	case engine.UndoClearText:
		return "it is not sealed: a tenant could have written it (or a build before sealing was required did)"
	case engine.UndoTooLarge:
		return "it is larger than synchook ever writes"
	case engine.UndoIdentity:
		return "it would change the object's identity"
	default:
		return "it cannot be applied"
	}
}

// describeError returns err for the report without object data: for an API error only its
// reason, code and the field paths and types of its causes (an apiserver message may quote
// field values, e.g. a Pod update's spec diff); other errors as they are.
func describeError(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err.Error()
	}
	st := status.Status()
	reason := string(st.Reason)
	if reason == "" {
		reason = "error"
	}
	out := fmt.Sprintf("%s (%d)", reason, st.Code)
	if st.Details != nil {
		var causes []string
		for _, c := range st.Details.Causes {
			if c.Field != "" {
				causes = append(causes, c.Field+": "+string(c.Type))
			}
		}
		if len(causes) > 0 {
			out += "; " + strings.Join(causes, ", ")
		}
	}
	// Keep the context Run wrapped around the API error ("update: …"), not the error's text.
	if statusErr, ok := status.(error); ok {
		if prefix, _, found := strings.Cut(err.Error(), ": "+statusErr.Error()); found {
			out = prefix + ": " + out
		}
	}
	return out
}
