package hookclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/parallel"
	"github.com/synchook/synchook/patch"
)

// Client calls one synchook sidecar. Create it with New; it is safe for concurrent use.
type Client struct {
	opts Options

	tlsMu sync.Mutex // serialises CA reloads
	tls   atomic.Pointer[tlsState]

	unix *http.Client // plain HTTP over Options.SocketPath; nil for HTTPS

	capsMu     sync.Mutex // serialises capability fetches
	caps       atomic.Pointer[capsState]
	capsFailed atomic.Int64 // Unix nanoseconds of the last failed fetch, 0 after a success
}

// New returns a Client for opts (defaults applied). It does no I/O: the CA file and the
// capabilities are read on first use (or by Refresh). It fails when neither SocketPath nor URL
// and CAFile are set, URL is not https, or FailurePolicies names an unknown hook type or policy.
func New(opts Options) (*Client, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	c := &Client{opts: opts}
	if opts.SocketPath != "" {
		tr := newTransport(nil, opts.MaxIdleConnsPerHost)
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "unix", opts.SocketPath)
		}
		c.unix = &http.Client{Transport: tr}
	}
	return c, nil
}

// Policy returns the failure policy of hook type t.
func (c *Client) Policy(t hooks.HookType) FailurePolicy {
	if p, ok := c.opts.FailurePolicies[t]; ok {
		return p
	}
	return DefaultFailurePolicy(t)
}

// Close closes the idle keep-alive connections to the sidecar. The Client stays usable.
func (c *Client) Close() {
	if c.unix != nil {
		c.unix.CloseIdleConnections()
	}
	if st := c.tls.Load(); st != nil {
		st.transport.CloseIdleConnections()
	}
}

// Mutate runs the hooks of type t on obj (a typed object of Options.Scheme, or an
// *unstructured.Unstructured) and applies the resulting patch to obj in place: the patched
// JSON is decoded into a fresh object that then replaces *obj, so removed fields are gone.
// obj's TypeMeta is left as it was.
//
// When the capabilities say (GVK, t) has no hooks, it returns nil without a request. Errors
// are *Error values wrapping ErrDenied (a hook refused: under both policies) or ErrUnavailable
// (only under the Fail policy; under Ignore obj is left unmutated and nil is returned). When
// ctx itself ends, its error is returned under both policies.
func (c *Client) Mutate(ctx context.Context, t hooks.HookType, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, c.opts.Scheme)
	if err != nil {
		return fmt.Errorf("hookclient: %s: GVK of %T: %w", t, obj, err)
	}
	return c.mutate(ctx, t, gvk, obj)
}

// MutateList runs the hooks of type t on every item of list (a typed list such as
// *corev1.PodList, or an *unstructured.UnstructuredList) in one request, and replaces the
// items with the patched ones as Mutate does; an item whose labels or annotations alone
// change keeps its object and gets new maps (never the old maps changed in place). Lists
// whose JSON is longer than Options.MaxBatchBytes are sent in several requests of whole items,
// and no item changes unless every request succeeded. Failure handling is that of Mutate, for
// the list as a whole: under Ignore a failed request leaves every item unmutated.
func (c *Client) MutateList(ctx context.Context, t hooks.HookType, list client.ObjectList) error {
	gvk, err := apiutil.GVKForObject(list, c.opts.Scheme)
	if err != nil {
		return fmt.Errorf("hookclient: %s: GVK of %T: %w", t, list, err)
	}
	return c.mutateList(ctx, t, gvk, list)
}

// mutate is Mutate with the GVK already known.
func (c *Client) mutate(ctx context.Context, t hooks.HookType, gvk schema.GroupVersionKind, obj client.Object) error {
	if !c.Hooked(ctx, gvk, t) {
		return nil
	}
	start := time.Now()
	ref := objectRef(obj.GetNamespace(), obj.GetName())
	fail := func(code int32, err error) error {
		return c.onFailure(ctx, &Error{Type: t, GVK: gvk, Object: ref, Code: code, Err: err})
	}
	kept := obj.GetObjectKind().GroupVersionKind()
	obj.GetObjectKind().SetGroupVersionKind(gvk) // the sidecar decodes unknown kinds by apiVersion and kind
	raw, err := json.Marshal(obj)
	obj.GetObjectKind().SetGroupVersionKind(kept)
	if err != nil {
		return &Error{Type: t, GVK: gvk, Object: ref, Err: fmt.Errorf("encode object: %w", err)}
	}
	p, code, err := c.review(ctx, t, gvk, obj.GetNamespace(), obj.GetName(), raw)
	if err != nil {
		return fail(code, err)
	}
	if p != nil {
		if err := applyPatch(obj, raw, p, kept); err != nil {
			return fail(0, fmt.Errorf("%w: patch from the sidecar: %w", ErrUnavailable, err))
		}
	}
	c.opts.Log.V(1).Info("hooked", "hookType", t, "gvk", gvk.String(), "object", ref,
		"patched", p != nil, "duration", time.Since(start).String())
	return nil
}

// mutateList is MutateList with the GVK already known.
func (c *Client) mutateList(ctx context.Context, t hooks.HookType, gvk schema.GroupVersionKind, list client.ObjectList) error {
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("hookclient: %s %s: %w", t, gvk.Kind, err)
	}
	if len(items) == 0 || !c.Hooked(ctx, gvk, t) {
		return nil
	}
	start := time.Now()
	ref := strconv.Itoa(len(items)) + " items"
	batches, err := c.batches(gvk, items)
	if err != nil {
		return &Error{Type: t, GVK: gvk, Object: ref, Err: err}
	}
	out := slices.Clone(items)
	var changes []itemChange // label/annotation changes, made once every batch has succeeded
	patched := 0
	for _, b := range batches {
		p, code, err := c.review(ctx, t, gvk, "", "", b.json)
		if err == nil && p != nil {
			var n int
			var more []itemChange
			if n, more, err = b.patchItems(p, out); err != nil {
				code, err = 0, fmt.Errorf("%w: patch from the sidecar: %w", ErrUnavailable, err)
			}
			patched += n
			changes = append(changes, more...)
		}
		if err != nil {
			return c.onFailure(ctx, &Error{Type: t, GVK: gvk, Object: ref, Code: code, Err: err})
		}
	}
	for _, ch := range changes {
		ch.change.apply(ch.item)
	}
	if patched > 0 {
		if err := meta.SetList(list, out); err != nil {
			return &Error{Type: t, GVK: gvk, Object: ref, Err: fmt.Errorf("set items: %w", err)}
		}
	}
	c.opts.Log.V(1).Info("hooked", "hookType", t, "gvk", gvk.String(), "object", ref, "requests", len(batches),
		"patchedItems", patched, "duration", time.Since(start).String())
	return nil
}

// batch is items[start:start+len(items)] of a list: the JSON of each item, and the JSON of a
// list of them that is sent.
type batch struct {
	start int
	items [][]byte
	json  []byte
}

// batches encodes items into lists of gvk no longer than MaxBatchBytes each (an item longer
// than that goes alone).
func (c *Client) batches(gvk schema.GroupVersionKind, items []runtime.Object) ([]batch, error) {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	head, err := json.Marshal(struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Metadata   struct{} `json:"metadata"`
	}{apiVersion, kind, struct{}{}})
	if err != nil {
		return nil, err
	}
	head = append(head[:len(head)-1], `,"items":[`...)
	encoded := make([][]byte, len(items))
	if err := parallel.For(len(items), func(i int) error {
		b, err := json.Marshal(items[i])
		if err != nil {
			return fmt.Errorf("encode items[%d]: %w", i, err)
		}
		encoded[i] = b
		return nil
	}); err != nil {
		return nil, err
	}
	var out []batch
	cur := batch{json: bytes.Clone(head)}
	for i, b := range encoded {
		if len(cur.items) > 0 && len(cur.json)+len(b)+3 > c.opts.MaxBatchBytes {
			out = append(out, cur.close())
			cur = batch{start: i, json: bytes.Clone(head)}
		}
		if len(cur.items) > 0 {
			cur.json = append(cur.json, ',')
		}
		cur.json = append(cur.json, b...)
		cur.items = append(cur.items, b)
	}
	return append(out, cur.close()), nil
}

func (b batch) close() batch {
	b.json = append(b.json, ']', '}')
	return b
}

// itemOperation is one operation of a list patch, its value kept as raw JSON.
type itemOperation struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// itemChange is a label/annotation change to make to one item of the caller's list.
type itemChange struct {
	item   metav1.Object
	change metaChange
}

// patchItems applies the list patch p to the batch: the operations of each item (paths
// /items/N/...) that only change its labels and annotations are returned as changes to make to
// the item in out (the caller's own object) once every batch has succeeded; the other items'
// operations are applied to that item's own JSON, which is decoded into a fresh object of the
// item's type and put into out. It returns the number of items patched. Applying per item
// keeps the cost proportional to the items that changed, not to the whole list, and neither
// path copies an item whose labels alone change.
func (b batch) patchItems(p []byte, out []runtime.Object) (int, []itemChange, error) {
	var ops []itemOperation
	if err := kjson.UnmarshalCaseSensitivePreserveInts(p, &ops); err != nil {
		return 0, nil, fmt.Errorf("decode JSON patch: %w", err)
	}
	byItem := map[int][]itemOperation{}
	for _, op := range ops {
		i, rest, err := splitItemPath(op.Path, len(b.items))
		if err != nil {
			return 0, nil, err
		}
		op.Path = rest
		if op.From != "" {
			j, from, err := splitItemPath(op.From, len(b.items))
			if err != nil || j != i {
				return 0, nil, fmt.Errorf("operation %s from %q to %q crosses items", op.Op, op.From, op.Path)
			}
			op.From = from
		}
		byItem[i] = append(byItem[i], op)
	}
	touched := slices.Sorted(maps.Keys(byItem))
	fresh := make([]runtime.Object, len(touched))
	changes := make([]itemChange, len(touched))
	err := parallel.For(len(touched), func(k int) error {
		i := touched[k]
		if item, ok := out[b.start+i].(metav1.Object); ok {
			if change, ok := metadataChange(item, byItem[i]); ok {
				changes[k] = itemChange{item: item, change: change}
				return nil
			}
		}
		itemPatch, err := json.Marshal(byItem[i])
		if err != nil {
			return err
		}
		patched, err := patch.Apply(b.items[i], itemPatch)
		if err != nil {
			return fmt.Errorf("items[%d]: %w", b.start+i, err)
		}
		obj, err := decodeFresh(patched, out[b.start+i])
		if err != nil {
			return fmt.Errorf("decode patched items[%d]: %w", b.start+i, err)
		}
		fresh[k] = obj
		return nil
	})
	if err != nil {
		return 0, nil, err // out is untouched: no item is half-patched
	}
	kept := changes[:0]
	for k, i := range touched {
		if fresh[k] != nil {
			out[b.start+i] = fresh[k]
		} else {
			kept = append(kept, changes[k])
		}
	}
	return len(touched), kept, nil
}

// splitItemPath splits the JSON Pointer "/items/N/rest" into N and "/rest". N must be below n
// and rest must not be empty (no operation may replace a whole item).
func splitItemPath(path string, n int) (int, string, error) {
	after, ok := strings.CutPrefix(path, "/items/")
	idx, rest, found := strings.Cut(after, "/")
	i, err := strconv.Atoi(idx)
	if !ok || !found || err != nil || i < 0 || i >= n || strconv.Itoa(i) != idx {
		return 0, "", fmt.Errorf("patch path %q is not inside one of the %d items sent", path, n)
	}
	return i, "/" + rest, nil
}

// applyPatch applies the JSON Patch p, computed against raw (the JSON of obj), to obj: straight
// to its labels and annotations when that is all it changes (applyToMetadata), else by
// applying it to raw and decoding the result into obj.
func applyPatch(obj client.Object, raw, p []byte, kept schema.GroupVersionKind) error {
	var ops []itemOperation
	if kjson.UnmarshalCaseSensitivePreserveInts(p, &ops) == nil && applyToMetadata(obj, ops) {
		return nil
	}
	patched, err := patch.Apply(raw, p)
	if err != nil {
		return err
	}
	return replace(obj, patched, kept)
}

// decodeFresh decodes data into a new object of like's Go type, as the Kubernetes JSON
// serializer does.
func decodeFresh[T runtime.Object](data []byte, like T) (T, error) {
	fresh := reflect.New(reflect.TypeOf(like).Elem()).Interface().(T)
	return fresh, kjson.UnmarshalCaseSensitivePreserveInts(data, fresh)
}

// replace decodes patched into a fresh object of obj's type, gives it the TypeMeta kept and
// copies it over *obj.
func replace(obj client.Object, patched []byte, kept schema.GroupVersionKind) error {
	fresh, err := decodeFresh(patched, obj)
	if err != nil {
		return fmt.Errorf("decode patched object: %w", err)
	}
	fresh.GetObjectKind().SetGroupVersionKind(kept)
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	return nil
}

// onFailure applies the failure policy to a failed call: denials, and any failure once ctx
// has ended, are returned; transport failures are returned under Fail and logged and dropped
// under Ignore.
func (c *Client) onFailure(ctx context.Context, err *Error) error {
	if errors.Is(err, ErrDenied) || ctx.Err() != nil || c.Policy(err.Type) == Fail {
		return err
	}
	c.opts.Log.Info("sidecar failed; going on unmutated (failure policy Ignore)", "hookType", err.Type,
		"gvk", err.GVK.String(), "object", err.Object, "error", err.Err.Error())
	return nil
}

// operations maps the operation of a hook type to the admission operation sent with it. Get
// hook types have none and send an empty operation.
var operations = map[hooks.Op]admissionv1.Operation{
	hooks.OpCreate: admissionv1.Create,
	hooks.OpUpdate: admissionv1.Update,
	hooks.OpDelete: admissionv1.Delete,
}

// review POSTs an AdmissionReview for object to /mutate/{t} and returns the JSON Patch of the
// answer (nil when nothing changed) or an error wrapping ErrDenied or ErrUnavailable, with the
// status code the sidecar answered with (0 when none).
func (c *Client) review(ctx context.Context, t hooks.HookType, gvk schema.GroupVersionKind, namespace, name string, object []byte) ([]byte, int32, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req := &admissionv1.AdmissionRequest{
		UID:       uuid.NewUUID(),
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Namespace: namespace,
		Name:      name,
		Operation: operations[t.Op()],
	}
	body, err := encodeReview(req, object)
	if err != nil {
		return nil, 0, fmt.Errorf("encode AdmissionReview: %w", err)
	}
	url := c.opts.URL + "/mutate/" + string(t)
	if deadline, ok := ctx.Deadline(); ok {
		url += "?timeout=" + time.Until(deadline).Truncate(time.Millisecond).String()
	}
	status, data, err := c.send(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if status != http.StatusOK {
		return nil, int32(status), fmt.Errorf("%w: HTTP %d: %s", ErrUnavailable, status, snippet(data))
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &review); err != nil {
		return nil, 0, fmt.Errorf("%w: response is not an AdmissionReview: %w", ErrUnavailable, err)
	}
	resp := review.Response
	switch {
	case resp == nil:
		return nil, 0, fmt.Errorf("%w: AdmissionReview has no response", ErrUnavailable)
	case resp.UID != req.UID:
		return nil, 0, fmt.Errorf("%w: response uid %q does not match request uid %q", ErrUnavailable, resp.UID, req.UID)
	case !resp.Allowed:
		code, msg := int32(0), "no reason given"
		if resp.Result != nil {
			code, msg = resp.Result.Code, resp.Result.Message
		}
		return nil, code, fmt.Errorf("%w (%d): %s", ErrDenied, code, msg)
	case len(resp.Patch) == 0:
		return nil, 0, nil
	case resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch:
		return nil, 0, fmt.Errorf("%w: response has a patch that is not a JSONPatch", ErrUnavailable)
	}
	return resp.Patch, 0, nil
}

// encodeReview returns the AdmissionReview of req with object (valid JSON, from json.Marshal) as
// request.object, or as request.oldObject for a DELETE, as kube-apiserver sends it.
//
// json.Marshal would re-scan and compact the object, which for a batched List of 1,000 items
// is megabytes; instead the review is encoded with both objects null and the object's bytes
// are put in place of the null. The replaced text is found by its key: a key with its quotes
// never occurs inside a JSON string value, where quotes are escaped, and req has no map with
// keys of the caller's (userInfo stays empty), so the first match is the field itself.
func encodeReview(req *admissionv1.AdmissionRequest, object []byte) ([]byte, error) {
	env, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		return nil, err
	}
	key := `"object":null`
	if req.Operation == admissionv1.Delete {
		key = `"oldObject":null`
	}
	at := bytes.Index(env, []byte(key))
	if at < 0 {
		return nil, fmt.Errorf("no %s in the encoded AdmissionReview", key)
	}
	at += len(key) - len("null")
	body := make([]byte, 0, len(env)-len("null")+len(object))
	body = append(append(append(body, env[:at]...), object...), env[at+len("null"):]...)
	return body, nil
}

// snippet returns at most the first 200 bytes of an error body, for error messages.
func snippet(b []byte) string {
	const limit = 200
	s := strings.TrimSpace(string(b))
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}
