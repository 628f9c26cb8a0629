package capture

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// MACPrefix starts every redacted Secret value: "hmac-sha256:" followed by the lower-case hex
// HMAC-SHA256 of the value's bytes (for data, the decoded bytes; for stringData, the string)
// under the process's capture key (see the package doc).
const MACPrefix = "hmac-sha256:"

// hashed matches a redacted value: this package's, or the unkeyed "sha256:<hex>" of files
// written before values were keyed (replay still reads them).
var hashed = regexp.MustCompile(`^(hmac-)?sha256:[0-9a-f]{64}$`)

// macKey is the key of the redacted values: made at random once per process and written
// nowhere, so that the capture files alone do not let anyone test a guess of a value.
var macKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (it crashes the program instead)
	return k
}()

// macOf returns the redacted form of the value b.
func macOf(b []byte) string {
	m := hmac.New(sha256.New, macKey)
	m.Write(b)
	return MACPrefix + hex.EncodeToString(m.Sum(nil))
}

// redactedText replaces a Secret value found in an error message.
const redactedText = "[redacted]"

// secretKind tells whether gvk is a v1 Secret (item) or a v1 SecretList (list); neither for
// any other kind.
func secretKind(gvk schema.GroupVersionKind) (item, list bool) {
	if gvk.Group != "" || gvk.Version != "v1" {
		return false, false
	}
	return gvk.Kind == "Secret", gvk.Kind == "SecretList"
}

// mapper says what becomes of each Secret value: data (the base64 text on the wire) and
// stringData (plain text) values, also inside the undo annotation.
type mapper struct {
	data, str func(string) string
}

// redactMapper replaces every value by its MAC, whatever it holds: what capture writes.
var redactMapper = mapper{
	data: func(v string) string {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil {
			return macOf(b)
		}
		return macOf([]byte(v))
	},
	str: func(v string) string { return macOf([]byte(v)) },
}

// placeholderMapper turns the MACs of a captured Secret into values a typed Secret decodes:
// a data MAC becomes the base64 of the MAC text (data must be base64), so that the hooks see
// "hmac-sha256:<hex>" as the value. What replay runs the chain on.
var placeholderMapper = mapper{
	data: func(v string) string {
		if hashed.MatchString(v) {
			return base64.StdEncoding.EncodeToString([]byte(v))
		}
		return v
	},
	str: func(v string) string { return v },
}

// rehashMapper redacts a replayed result like capture did, keeping the placeholders (values
// that are, or decode to, a MAC) as the MAC they stand for. A value a hook writes anew gets
// this process's MAC, which differs from the capturing process's.
var rehashMapper = mapper{
	data: func(v string) string {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return macOf([]byte(v))
		}
		if hashed.Match(b) {
			return string(b)
		}
		return macOf(b)
	},
	str: func(v string) string {
		if hashed.MatchString(v) {
			return v
		}
		return macOf([]byte(v))
	},
}

// decodeJSON decodes b keeping numbers exactly as written.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

// encodeJSON encodes v compactly without HTML escaping.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// mapObject returns the JSON object obj of kind gvk with every Secret value mapped by m: the
// values of data and stringData, the Secret values recorded in the undo annotation and the
// whole kubectl.kubernetes.io/last-applied-configuration annotation (a copy of the Secret), of
// a Secret or of each item of a SecretList. Any other kind is returned as it is.
func mapObject(gvk schema.GroupVersionKind, obj []byte, m mapper) ([]byte, error) {
	item, list := secretKind(gvk)
	if !item && !list {
		return obj, nil
	}
	v, err := decodeJSON(obj)
	if err != nil {
		return nil, err
	}
	return encodeJSON(mapAt(nil, v, m, list))
}

// mapPatch returns the JSON Patch p (of an object of kind gvk) with every Secret value in its
// operations' values mapped by m (see mapObject); nil stays nil.
func mapPatch(gvk schema.GroupVersionKind, p []byte, m mapper) ([]byte, error) {
	item, list := secretKind(gvk)
	if (!item && !list) || len(p) == 0 {
		return p, nil
	}
	v, err := decodeJSON(p)
	if err != nil {
		return nil, err
	}
	ops, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("JSON patch is not an array")
	}
	for i, o := range ops {
		op, ok := o.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("JSON patch operation %d is not an object", i)
		}
		value, has := op["value"]
		if !has {
			continue
		}
		path, _ := op["path"].(string)
		tokens, err := patch.ParsePointer(path)
		if err != nil {
			// Not a pointer into the object: redact the whole value to be safe.
			op["value"] = mapAll(value, m)
			continue
		}
		op["value"] = mapAt(tokens, value, m, list)
	}
	return encodeJSON(ops)
}

// mapAt maps the Secret values in v, the value at tokens of a Secret (list false) or a
// SecretList (list true).
func mapAt(tokens []string, v any, m mapper, list bool) any {
	if list {
		return mapListAt(tokens, v, m)
	}
	if len(tokens) == 0 {
		mapMembers(v, nil, []string{"data", "stringData", "metadata"}, m, false)
		return v
	}
	switch tokens[0] {
	case "data":
		return mapValuesAt(tokens, v, m.data)
	case "stringData":
		return mapValuesAt(tokens, v, m.str)
	case "metadata":
		return mapMetadataAt(tokens, v, m)
	}
	return v
}

// mapMembers maps, when v is an object, the value of each of its members named in keys as
// mapAt maps the value at path followed by that key (of a SecretList when list).
func mapMembers(v any, path, keys []string, m mapper, list bool) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	for _, k := range keys {
		if x, ok := obj[k]; ok {
			obj[k] = mapAt(append(slices.Clip(path), k), x, m, list)
		}
	}
}

// mapListAt is mapAt for v, the value at tokens of a SecretList: the items are Secrets.
func mapListAt(tokens []string, v any, m mapper) any {
	switch {
	case len(tokens) == 0:
		mapMembers(v, nil, []string{"items"}, m, true)
	case tokens[0] != "items":
	case len(tokens) == 1:
		if items, ok := v.([]any); ok {
			for i := range items {
				items[i] = mapAt(nil, items[i], m, false)
			}
		}
	default:
		return mapAt(tokens[2:], v, m, false)
	}
	return v
}

// mapValuesAt maps with f the Secret values in v, the value at tokens of a Secret's data or
// stringData: the map of values (tokens of length 1) or one value.
//
// A value that is not a string (an object the decoder would refuse: "data":["…"],
// "stringData":{"k":["…"]}, a number) is mapped whole, by its JSON encoding: a refused
// object is captured too, and its values must not leave as they are.
func mapValuesAt(tokens []string, v any, f func(string) string) any {
	if len(tokens) == 1 {
		if values, ok := v.(map[string]any); ok {
			for k, x := range values {
				values[k] = mapValue(x, f)
			}
			return v
		}
	}
	return mapValue(v, f)
}

// mapValue maps one Secret value with f: a string as it is, null stays null, anything else by
// its JSON encoding.
func mapValue(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case nil:
		return nil
	}
	b, err := encodeJSON(v)
	if err != nil {
		return f("")
	}
	return f(string(b))
}

// mapMetadataAt maps the Secret values in v, the value at tokens of a Secret's metadata: those
// in the undo annotation and the whole last-applied-configuration annotation.
func mapMetadataAt(tokens []string, v any, m mapper) any {
	switch {
	case len(tokens) == 1:
		mapMembers(v, []string{"metadata"}, []string{"annotations"}, m, false)
	case tokens[1] != "annotations":
	case len(tokens) == 2:
		if a, ok := v.(map[string]any); ok {
			if u, ok := a[undo.Annotation].(string); ok {
				a[undo.Annotation] = mapUndo(u, m)
			}
			if l, ok := a[corev1.LastAppliedConfigAnnotation].(string); ok {
				a[corev1.LastAppliedConfigAnnotation] = m.str(l)
			}
		}
	case len(tokens) == 3 && tokens[2] == undo.Annotation:
		if u, ok := v.(string); ok {
			return mapUndo(u, m)
		}
	case len(tokens) == 3 && tokens[2] == corev1.LastAppliedConfigAnnotation:
		// kubectl apply's copy of the whole Secret, its data included: mapped whole.
		if l, ok := v.(string); ok {
			return m.str(l)
		}
	}
	return v
}

// SealedUndo stands in a capture of a Secret for the value of its sealed undo annotation
// (package undo); the undo of other kinds is kept as it is (a replay with the same key,
// --undo-key-file, opens it).
const SealedUndo = "(sealed undo)"

// mapUndo maps the Secret values that the undo annotation's value u records (the hooked and
// original values of entries under /data and /stringData). A value that is not an undo array
// is mapped whole, as stringData.
func mapUndo(u string, m mapper) string {
	if undo.IsSealed(u) {
		// Sealed under synchook's undo key, which no capture holds, over the Secret's real
		// values, which a replay never has: both sides keep only that it was sealed.
		return SealedUndo
	}
	var entries []undo.Entry
	if err := json.Unmarshal([]byte(u), &entries); err != nil {
		return m.str(u)
	}
	changed := false
	for i := range entries {
		e := &entries[i]
		tokens, err := patch.ParsePointer(e.Path)
		if err != nil {
			return m.str(u)
		}
		if len(tokens) > 0 && tokens[0] != "data" && tokens[0] != "stringData" && tokens[0] != "metadata" {
			continue
		}
		for _, raw := range []*json.RawMessage{&e.Hooked, &e.Original} {
			if len(*raw) == 0 {
				continue
			}
			v, err := decodeJSON(*raw)
			if err != nil {
				return m.str(u)
			}
			b, err := encodeJSON(mapAt(tokens, v, m, false))
			if err != nil {
				return m.str(u)
			}
			if !bytes.Equal(b, *raw) {
				*raw, changed = b, true
			}
		}
	}
	if !changed {
		return u
	}
	b, err := encodeJSON(entries)
	if err != nil {
		return m.str(u)
	}
	return string(b)
}

// mapAll maps every string in v as stringData: for a value at a place mapAt cannot read.
func mapAll(v any, m mapper) any {
	switch x := v.(type) {
	case string:
		return m.str(x)
	case []any:
		for i := range x {
			x[i] = mapAll(x[i], m)
		}
	case map[string]any:
		for k := range x {
			x[k] = mapAll(x[k], m)
		}
	}
	return v
}

// secretTexts returns the texts of the Secret values in obj (data decoded and as sent,
// stringData), at least 4 bytes long, to scrub from error messages; nil for other kinds.
func secretTexts(gvk schema.GroupVersionKind, obj []byte) []string {
	item, list := secretKind(gvk)
	if !item && !list {
		return nil
	}
	v, err := decodeJSON(obj)
	if err != nil {
		return nil
	}
	var out []string
	add := func(s string) {
		if len(s) >= 4 {
			out = append(out, s)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		for _, k := range []string{"data", "stringData"} {
			values, _ := obj[k].(map[string]any)
			for _, x := range values {
				s, ok := x.(string)
				if !ok {
					continue
				}
				add(s)
				if b, err := base64.StdEncoding.DecodeString(s); err == nil && k == "data" {
					add(string(b))
				}
			}
		}
		if items, ok := obj["items"].([]any); ok {
			for _, it := range items {
				walk(it)
			}
		}
	}
	walk(v)
	// Longest first, so that a value that contains another is scrubbed whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// scrub replaces every text in texts in s by redactedText, also in its Go-quoted form (as %q
// prints it). It is a second line only: the hooks' messages on Secrets never reach capture
// (failure.WithheldError), and the rest of an error's text is synchook's own.
func scrub(s string, texts []string) string {
	for _, t := range texts {
		s = strings.ReplaceAll(s, t, redactedText)
		if q := strconv.Quote(t); len(q) > 2 {
			s = strings.ReplaceAll(s, q[1:len(q)-1], redactedText)
		}
	}
	return s
}

// RedactValue returns v, the decoded JSON (maps, lists, strings, json.Number) of an object of
// kind gvk or of its undo entries' place in it, with every Secret value redacted as capture
// writes it (mapObject with the MACs of this process's key): so that two values show the same
// text exactly when they are equal, and a diff shows which key differs but no value. v is
// changed in place; any kind but a v1 Secret or SecretList is returned as it is. For
// `synchook test`, which prints objects in its diffs.
func RedactValue(gvk schema.GroupVersionKind, v any) any {
	item, list := secretKind(gvk)
	if !item && !list {
		return v
	}
	return mapAt(nil, v, redactMapper, list)
}

// ScrubText returns s with every Secret value of obj (the JSON object of kind gvk: data as
// sent and decoded, stringData) replaced by "[redacted]", also Go-quoted, as capture scrubs
// the error messages it keeps. s as it is for other kinds.
func ScrubText(gvk schema.GroupVersionKind, obj []byte, s string) string {
	return scrub(s, secretTexts(gvk, obj))
}
