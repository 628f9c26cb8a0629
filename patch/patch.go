package patch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"gomodules.xyz/jsonpatch/v2"

	"github.com/synchook/synchook/internal/jsonscan"
)

// Operation is one RFC 6902 operation: op, path and, for add and replace, value.
type Operation = jsonpatch.Operation

// Marshal returns the JSON array of ops, or nil when there are none (so that "no change" is an
// absent patch, not "[]").
//
// The bytes are those encoding/json gives for the slice (jsonpatch.Operation's MarshalJSON:
// "value" present for add and replace, null included, omitted for a nil value otherwise),
// written without reflection for the operations and their string values; other values go
// through encoding/json.
func Marshal(ops []Operation) ([]byte, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	size := 2
	for i := range ops {
		size += 32 + len(ops[i].Operation) + len(ops[i].Path) // the array and member syntax
		if v, ok := ops[i].Value.(string); ok {
			size += len(v)
		}
	}
	b := make([]byte, 0, size) // exact for plain strings (a sealed undo is longer than any fixed guess)
	b = append(b, '[')
	for i := range ops {
		op := &ops[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"op":`...)
		b = jsonscan.AppendString(b, op.Operation)
		b = append(b, `,"path":`...)
		b = jsonscan.AppendString(b, op.Path)
		if op.Value != nil || op.Operation == "add" || op.Operation == "replace" {
			b = append(b, `,"value":`...)
			switch v := op.Value.(type) {
			case string:
				b = jsonscan.AppendString(b, v)
			case nil:
				b = append(b, "null"...)
			default:
				value, err := json.Marshal(v)
				if err != nil {
					return nil, fmt.Errorf("marshal JSON patch: %s %s: %w", op.Operation, op.Path, err)
				}
				b = append(b, value...)
			}
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// Apply applies the JSON Patch patchJSON (a JSON array of operations) to doc and returns the
// new document. An empty or nil patch returns doc unchanged. It fails, leaving doc untouched,
// when the patch is malformed or an operation does not apply (e.g. replace of a missing path).
func Apply(doc, patchJSON []byte) ([]byte, error) {
	if len(patchJSON) == 0 {
		return doc, nil
	}
	p, err := jsonpatchapply.DecodePatch(patchJSON)
	if err != nil {
		return nil, fmt.Errorf("decode JSON patch: %w", err)
	}
	// evanphx/json-patch tells an array document from an object by its first byte: leading
	// white space would make " [0]" an object (found by FuzzDiff).
	out, err := p.Apply(bytes.TrimLeft(doc, " \t\r\n"))
	if err != nil {
		return nil, fmt.Errorf("apply JSON patch: %w", err)
	}
	return out, nil
}

// Rebase returns operations that, applied to raw, make every change that ops makes, where ops
// was computed between a normalised copy of raw (e.g. its typed round trip) and the mutated
// document. Nothing to change gives nil.
//
// When every operation surely applies to raw as it is (checked on raw's bytes without decoding
// them), ops is returned unchanged. Otherwise (the normalised copy had a parent that raw lacks,
// such as "status": {}), the operations are applied one by one with missing parents created and
// removals of missing paths skipped, and the operations are created again between raw and that
// result, so they still touch only what ops changed. raw must be valid JSON.
func Rebase(raw []byte, ops []Operation) ([]Operation, error) {
	return RebaseVia(raw, nil, ops)
}

// RebaseVia is Rebase for a caller that keeps an index of raw: lookup answers, for a JSON
// Pointer, the trimmed value at it in raw and false where there is none or an object on the
// way has the key more than once (nil: Rebase reads raw itself).
func RebaseVia(raw []byte, lookup func(pointer string) ([]byte, bool), ops []Operation) ([]Operation, error) {
	if lookup == nil {
		lookup = jsonscan.NewIndex(raw).LookupUnique
	}
	if len(ops) == 0 || appliesVia(lookup, ops) {
		return ops, nil
	}
	patchJSON, err := Marshal(ops)
	if err != nil {
		return nil, err
	}
	if _, err := Apply(raw, patchJSON); err == nil {
		return ops, nil
	}
	lenient, err := applyLenient(raw, ops)
	if err != nil {
		return nil, err
	}
	return Diff(raw, lenient)
}

// applyLenient applies ops one at a time: add creates missing parents, a replace of a missing
// path becomes an add, and a remove of a missing path is skipped.
func applyLenient(doc []byte, ops []Operation) ([]byte, error) {
	opts := jsonpatchapply.NewApplyOptions()
	opts.EnsurePathExistsOnAdd = true
	opts.AllowMissingPathOnRemove = true
	for _, op := range ops {
		out, err := applyOne(doc, op, opts)
		if err != nil && op.Operation == "replace" {
			op.Operation = "add"
			out, err = applyOne(doc, op, opts)
		}
		if err != nil {
			return nil, fmt.Errorf("apply JSON patch operation %s %s: %w", op.Operation, op.Path, err)
		}
		doc = out
	}
	return doc, nil
}

func applyOne(doc []byte, op Operation, opts *jsonpatchapply.ApplyOptions) ([]byte, error) {
	b, err := json.Marshal([]Operation{op})
	if err != nil {
		return nil, err
	}
	p, err := jsonpatchapply.DecodePatch(b)
	if err != nil {
		return nil, err
	}
	return p.ApplyWithOptions(doc, opts)
}

// forbiddenPaths are the JSON Pointers that identify an object; no patch may touch them or a
// parent of them.
var forbiddenPaths = [...]string{"/apiVersion", "/kind", "/metadata/name", "/metadata/namespace", "/metadata/uid"}

// ForbiddenPathError is returned by GuardDocuments for an operation that touches a path that
// identifies an object (/apiVersion, /kind, /metadata/name, /metadata/namespace,
// /metadata/uid).
type ForbiddenPathError struct {
	// Hook names the hook that made the change, when known.
	Hook string
	// Op is the operation ("add", "replace", "remove", …) and Path the JSON Pointer it targets.
	Op, Path string
	// Field is the protected path the operation touches (Path itself or a child of it).
	Field string
}

func (e *ForbiddenPathError) Error() string {
	who := "patch"
	if e.Hook != "" {
		who = fmt.Sprintf("hook %q", e.Hook)
	}
	if e.Path == e.Field {
		return fmt.Sprintf("%s may not change %s (operation %s %s)", who, e.Field, e.Op, e.Path)
	}
	return fmt.Sprintf("%s may not change %s (operation %s %q touches it)", who, e.Field, e.Op, e.Path)
}

// ErrForbiddenPath is matched by every *ForbiddenPathError with errors.Is.
var ErrForbiddenPath = errors.New("patch touches a protected path")

// Is makes errors.Is(err, ErrForbiddenPath) true.
func (e *ForbiddenPathError) Is(target error) bool { return target == ErrForbiddenPath }

// Guard returns a *ForbiddenPathError for the first operation that targets a protected path,
// one of their parents (e.g. "replace /metadata") or the whole document, and nil when there is
// none. hook is put in the error to name who made the change; it may be empty.
func Guard(hook string, ops []Operation) error {
	for _, op := range ops {
		if field := ProtectedField(op.Path); field != "" {
			return &ForbiddenPathError{Hook: hook, Op: op.Operation, Path: op.Path, Field: field}
		}
	}
	return nil
}

// GuardDocuments is the guard for a patch between two known JSON documents (valid, as produced by
// json.Marshal): an operation on a parent of a protected path (e.g. "add /metadata" on an
// object that had no metadata) is allowed when the protected value is the same in both
// documents, absent in both or byte-identical. An operation on the protected path itself is
// always rejected.
func GuardDocuments(hook string, ops []Operation, before, after []byte) error {
	before, after = bytes.TrimSpace(before), bytes.TrimSpace(after)
	for _, op := range ops {
		field := ProtectedField(op.Path)
		if field == "" {
			continue
		}
		if op.Path != field {
			b, inBefore := lookup(before, field)
			a, inAfter := lookup(after, field)
			if inBefore == inAfter && bytes.Equal(a, b) {
				continue
			}
		}
		return &ForbiddenPathError{Hook: hook, Op: op.Operation, Path: op.Path, Field: field}
	}
	return nil
}

// ProtectedField returns the forbidden path that an operation on the JSON Pointer path would
// touch (path itself, a child of path, or everything for the root ""), or "" when none.
func ProtectedField(path string) string {
	for _, f := range forbiddenPaths {
		if path == f || path == "" || strings.HasPrefix(f, path+"/") {
			return f
		}
	}
	return ""
}
