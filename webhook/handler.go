package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/jsonscan"
	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/namespaces"
)

var admissionGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// mutateHandler serves POST /mutate/{hookType}.
type mutateHandler struct{ s *Server }

func (h *mutateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST is allowed", http.StatusMethodNotAllowed)
		return
	}
	hookType, err := hooks.ParseHookType(strings.TrimPrefix(r.URL.Path, "/mutate/"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	body, status, err := readBody(w, r, h.s.opts.MaxRequestBytes)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	review, err := decodeReview(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := review.Request
	gvk, object, err := requestObject(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}

	// The request context is cancelled when the server shuts down; a draining server must still
	// finish in-flight chains, so only the deadline is kept.
	// The deadline counts from the request's arrival: reading and decoding the review are part
	// of the time the caller (kube-apiserver's timeoutSeconds) gives the whole call.
	ctx, cancel := context.WithDeadline(context.WithoutCancel(r.Context()), start.Add(requestTimeout(r, h.s.opts.RequestTimeout)))
	defer cancel()
	if h.s.opts.Namespaces != nil {
		ctx = namespaces.WithSource(ctx, namespaces.Source{Lookup: h.s.opts.Namespaces})
	}
	var (
		res    engine.Result
		runErr error
	)
	if m := h.s.opts.Metrics; m != nil {
		done := m.Start(metrics.TransportAdmission, hookType, gvk, start)
		defer func() { done(res, runErr) }()
	}
	// decodeReview checked the body whole: the object and the old object are valid JSON.
	res, runErr = h.s.runner.MutateWithOptions(ctx, gvk, hookType, object,
		engine.MutateOptions{ValidJSON: true, OldObject: oldObjectOf(req, hookType)})
	if errors.Is(runErr, hooks.ErrMalformedOldObject) {
		runErr = fmt.Errorf("request.oldObject: %w", runErr)
	}
	if errors.Is(runErr, failure.ErrOverloaded) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, runErr.Error(), http.StatusTooManyRequests)
		h.s.opts.Log.Info("overloaded", "uid", req.UID, "hookType", hookType, "gvk", gvk.String())
		return
	}

	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: runErr == nil}
	if runErr != nil {
		resp.Result = &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    StatusCode(runErr),
			Message: runErr.Error(),
		}
	} else if res.Patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType, resp.Patch = &pt, res.Patch
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	writeJSON(w, http.StatusOK, &out)

	log := h.s.opts.Log
	if !log.Enabled() { // the fields below cost more than the line when nobody reads it
		return
	}
	kv := []any{
		"uid", req.UID, "hookType", hookType, "gvk", gvk.String(),
		"namespace", req.Namespace, "name", req.Name, "duration", time.Since(start).String(),
	}
	if runErr != nil {
		log.Info("hook chain failed", append(kv, "code", resp.Result.Code, "error", runErr.Error())...)
		return
	}
	log.Info("mutated", append(kv, "hooks", res.Hooks, "patchOperations", res.Operations)...)
}

// readBody reads at most limit bytes of the body; a larger body (by Content-Length or by what
// arrives) gives 413 without reading the rest.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, error) {
	if r.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
	}
	reader := http.MaxBytesReader(w, r.Body, limit)
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 {
		// A buffer of the announced size at once: io.ReadAll grows one from 512 bytes, copying
		// the body several times. A body longer than announced still grows it.
		buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
		_, err = buf.ReadFrom(reader)
		body = buf.Bytes()
	} else {
		body, err = io.ReadAll(reader)
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge,
				fmt.Errorf("request body exceeds the limit of %d bytes", limit)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	return body, http.StatusOK, nil
}

// decodeReview parses an admission.k8s.io/v1 AdmissionReview that has a request with a uid.
//
// The body is scanned once to check it is valid JSON (json.Valid), then request.object and
// request.oldObject are located without decoding them, and everything else is decoded with
// encoding/json as before with those two values read as null. The objects are handed on as
// sub-slices of body, never copied: the chain's typed decode is the only pass that reads them
// value by value. A body that is not valid JSON is decoded with json.Unmarshal only to name the
// syntax error.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	if !jsonscan.Valid(body) {
		var review admissionv1.AdmissionReview
		err := json.Unmarshal(body, &review)
		if err == nil { // unreachable: json.Valid and json.Unmarshal agree on validity
			err = errors.New("invalid JSON")
		}
		return nil, fmt.Errorf("request body is not an AdmissionReview: %w", err)
	}
	object, oldObject, rest, err := cutObjects(body)
	if err != nil {
		return nil, fmt.Errorf("request body is not an AdmissionReview: %w", err)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(rest, &review); err != nil {
		return nil, fmt.Errorf("request body is not an AdmissionReview: %w", err)
	}
	if gvk := review.GroupVersionKind(); gvk != admissionGVK {
		return nil, fmt.Errorf("request body is %q %q, want apiVersion %q kind %q",
			review.APIVersion, review.Kind, admissionGVK.GroupVersion().String(), admissionGVK.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, errors.New("AdmissionReview request has no uid")
	}
	review.Request.Object.Raw, review.Request.OldObject.Raw = object, oldObject
	return &review, nil
}

// cutObjects returns the values of request.object and request.oldObject in body (nil when
// absent or null) and body with both values replaced by null. body must be valid JSON.
//
// encoding/json matches keys case-insensitively and keeps the last of repeated keys; a key
// that json.Unmarshal could take for "request", "object" or "oldObject" other than exactly one
// member spelled so is an error, so that the values cut out are always the ones json.Unmarshal
// would have used.
func cutObjects(body []byte) (object, oldObject, rest []byte, err error) {
	top, ok := jsonscan.Members(body)
	if !ok {
		return nil, nil, nil, errors.New("not a JSON object")
	}
	request, err := onlyMember(top, "request")
	if err != nil || request == nil || request[0] != '{' {
		return nil, nil, body, err
	}
	inner, _ := jsonscan.Members(request)
	if object, err = onlyMember(inner, "object"); err != nil {
		return nil, nil, nil, fmt.Errorf("request: %w", err)
	}
	if oldObject, err = onlyMember(inner, "oldObject"); err != nil {
		return nil, nil, nil, fmt.Errorf("request: %w", err)
	}
	cuts := [][]byte{object, oldObject}
	if offset(body, object) > offset(body, oldObject) {
		cuts[0], cuts[1] = oldObject, object // in document order
	}
	rest = make([]byte, 0, len(body)+len("null"))
	done := 0
	for _, v := range cuts {
		if v != nil {
			start := offset(body, v)
			rest = append(append(rest, body[done:start]...), "null"...)
			done = start + len(v)
		}
	}
	rest = append(rest, body[done:]...)
	if string(object) == "null" {
		object = nil
	}
	if string(oldObject) == "null" {
		oldObject = nil
	}
	return object, oldObject, rest, nil
}

// onlyMember returns the value of the member named key (nil when there is none), or an error
// when key appears more than once or in another letter case.
func onlyMember(ms []jsonscan.Member, key string) ([]byte, error) {
	var value []byte
	for _, m := range ms {
		if !strings.EqualFold(m.Key, key) {
			continue
		}
		if m.Key != key {
			return nil, fmt.Errorf("key %q: keys are case-sensitive, want %q", m.Key, key)
		}
		if value != nil {
			return nil, fmt.Errorf("key %q appears more than once", key)
		}
		value = m.Value
	}
	return value, nil
}

// offset returns where v, a sub-slice of body, starts in body; -1 for a nil v. Both share one
// backing array, so the difference of their capacities is the offset.
func offset(body, v []byte) int {
	if v == nil {
		return -1
	}
	return cap(body) - cap(v)
}

// requestObject returns the GVK and JSON of the object a request is about: request.object, or
// request.oldObject for a DELETE. The GVK is request.kind, or the object's own apiVersion and
// kind when request.kind is empty.
func requestObject(req *admissionv1.AdmissionRequest) (schema.GroupVersionKind, []byte, error) {
	raw := req.Object.Raw
	if len(raw) == 0 || string(raw) == "null" {
		raw = req.OldObject.Raw
	}
	if len(raw) == 0 || string(raw) == "null" {
		return schema.GroupVersionKind{}, nil, errors.New("AdmissionReview request has neither object nor oldObject")
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	if gvk.Kind != "" && gvk.Version != "" {
		return gvk, raw, nil
	}
	gvk, err := engine.ObjectGVK(raw)
	if err != nil {
		return gvk, nil, fmt.Errorf("request has no kind, and its object: %w", err)
	}
	return gvk, raw, nil
}

// oldObjectOf returns the old object the hooks of hookType get for req: request.oldObject (the
// stored object) of an UPDATE, for an Update* hook type, when the request has both object and
// oldObject; nil otherwise (a DELETE's oldObject is the object itself: requestObject). It is a
// sub-slice of the body, never decoded here.
func oldObjectOf(req *admissionv1.AdmissionRequest, hookType hooks.HookType) []byte {
	if req.Operation != admissionv1.Update || hookType.Op() != hooks.OpUpdate || len(req.Object.Raw) == 0 {
		return nil
	}
	return req.OldObject.Raw // nil when absent or null (cutObjects)
}

// requestTimeout returns the smaller of def and the ?timeout= duration kube-apiserver sends.
func requestTimeout(r *http.Request, def time.Duration) time.Duration {
	if v := r.URL.Query().Get("timeout"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 && d < def {
			return d
		}
	}
	return def
}

func (s *Server) serveCapabilities(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "only GET is allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.caps)
}

func marshalCapabilities(reg *engine.Registry) ([]byte, error) {
	b, err := json.Marshal(reg.Capabilities())
	if err != nil {
		return nil, fmt.Errorf("marshal capabilities: %w", err)
	}
	return b, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
