package intake

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/internal/jsonfield"
)

// InputError is the cause of a *failure.DecodeError (so: 400, gRPC InvalidArgument, on every
// transport alike) when the request object is valid JSON that synchook and its caller could
// read as two different objects, so that a patch computed on synchook's reading would not
// mean what it says on the caller's:
//
//   - its apiVersion or kind, when present, names another kind than the request (for a List,
//     an item's names another kind than the list's items): a chain of one kind must never
//     run on an object of another (a Secret sent as a Pod would skip everything that guards
//     Secrets);
//   - the object, its metadata, metadata.labels or metadata.annotations repeats a member name;
//   - the object or its metadata has a member whose name differs only in letter case from
//     another member or from a field of the kind's Go type (for metadata, metav1.ObjectMeta;
//     for the object, the typed kind's fields, or apiVersion, kind and metadata for a kind
//     the scheme does not know). Label and annotation keys are case-sensitive data, where
//     only exact repeats count.
//
// synchook decodes as the Kubernetes serializer does: case-sensitive names, each repeated
// name a distinct member for its scans. vcluster decodes a plugin's answer with encoding/json,
// which matches names case-insensitively (by Unicode simple folding: "labelſ" is "labels")
// and keeps the last of repeated names. Refusing such objects is the only way both read the
// same object; the syncer and kube-apiserver never produce them.
type InputError struct {
	// Reason says what is wrong and where, e.g. `metadata: key "Labels" differs only in case
	// from "labels"` or `object is v1/Secret but the request is for v1/Pod`.
	Reason string
}

// Error returns Reason.
func (e *InputError) Error() string { return e.Reason }

// Shape is what Check knows of one kind: the JSON names of its Go type's fields at
// the top level and in metadata; maps says metadata has labels and annotations (ObjectMeta),
// whose keys are checked for repeats.
type Shape struct {
	top, meta fieldSet
	maps      bool
}

// fieldSet is the JSON names of a Go struct type's fields: index numbers each name; fold maps
// each name's fold key (foldKey) to the name.
type fieldSet struct {
	index map[string]int
	fold  map[string]string
}

func newFieldSet(names []string) fieldSet {
	s := fieldSet{index: make(map[string]int, len(names)), fold: make(map[string]string, len(names))}
	for _, n := range names {
		if _, ok := s.index[n]; ok {
			continue
		}
		s.index[n] = len(s.index)
		k := string(foldKey(nil, []byte(n)))
		if _, ok := s.fold[k]; !ok {
			s.fold[k] = n
		}
	}
	return s
}

type shapeKey struct {
	scheme *runtime.Scheme
	gvk    schema.GroupVersionKind
	list   bool
}

// shapes caches Shapes: one per scheme and hooked kind (or list of one).
var shapes sync.Map // shapeKey → *Shape

// ShapeOf returns the Shape of gvk in scheme; list says the request is a list of a hooked
// kind (for a kind the scheme does not know: items at the top, ListMeta as metadata).
func ShapeOf(scheme *runtime.Scheme, gvk schema.GroupVersionKind, list bool) *Shape {
	key := shapeKey{scheme, gvk, list}
	if s, ok := shapes.Load(key); ok {
		return s.(*Shape)
	}
	s, _ := shapes.LoadOrStore(key, newShape(scheme, gvk, list))
	return s.(*Shape)
}

func newShape(scheme *runtime.Scheme, gvk schema.GroupVersionKind, list bool) *Shape {
	top := []string{"apiVersion", "kind", "metadata"}
	meta := reflect.TypeFor[metav1.ObjectMeta]()
	if list {
		top = append(top, "items")
		meta = reflect.TypeFor[metav1.ListMeta]()
	}
	if obj, err := scheme.New(gvk); err == nil {
		fields := jsonFields(reflect.TypeOf(obj))
		top = top[:0]
		for name := range fields {
			top = append(top, name)
		}
		if t, ok := fields["metadata"]; ok {
			meta = t
		}
	}
	metaFields := jsonFields(meta)
	names := make([]string, 0, len(metaFields))
	for name := range metaFields {
		names = append(names, name)
	}
	slices.Sort(top) // fieldSet keeps the first of names that fold alike: the same one each run
	slices.Sort(names)
	_, labels := metaFields["labels"]
	_, annotations := metaFields["annotations"]
	return &Shape{top: newFieldSet(top), meta: newFieldSet(names), maps: labels && annotations}
}

// jsonFields returns the JSON names of struct type t's fields (pointers followed), with their
// types, as encoding/json names them (jsonfield.Of); none when t is no struct.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	fields := map[string]reflect.Type{}
	if t.Kind() != reflect.Struct {
		return fields
	}
	for _, f := range jsonfield.Of(t) {
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		fields[f.Name] = ft
	}
	return fields
}

// checkKind checks the values of apiVersion and kind (nil: absent) against gvk: each one, when
// present and neither null nor empty, must be gvk's.
func checkKind(apiVersion, kind []byte, gvk schema.GroupVersionKind, subject, expected string) error {
	av, err := typeMetaString("apiVersion", apiVersion)
	if err != nil {
		return err
	}
	k, err := typeMetaString("kind", kind)
	if err != nil {
		return err
	}
	if (len(av) == 0 || isAPIVersion(av, gvk)) && (len(k) == 0 || string(k) == gvk.Kind) {
		return nil
	}
	wantAPIVersion, wantKind := gvk.ToAPIVersionAndKind()
	var is string
	switch {
	case len(av) == 0:
		is = "kind " + quoted(string(k))
	case len(k) == 0:
		is = "apiVersion " + quoted(string(av))
	default:
		is = shown(string(av)) + "/" + shown(string(k))
	}
	return &InputError{Reason: fmt.Sprintf("%s is %s but %s %s/%s", subject, is, expected, wantAPIVersion, wantKind)}
}

// isAPIVersion reports whether av is the apiVersion of gvk ("group/version", or "version" for
// the core group), without building that string.
func isAPIVersion(av []byte, gvk schema.GroupVersionKind) bool {
	if gvk.Group == "" {
		return string(av) == gvk.Version
	}
	g, v, ok := bytes.Cut(av, []byte("/"))
	return ok && string(g) == gvk.Group && string(v) == gvk.Version
}

// typeMetaString returns the text of apiVersion's or kind's value (empty: absent or null), an
// *InputError for one that is no string.
func typeMetaString(name string, value []byte) ([]byte, error) {
	if value == nil || string(value) == "null" {
		return nil, nil
	}
	if text := keyName(value); text != nil {
		return text, nil
	}
	return nil, &InputError{Reason: fmt.Sprintf("%s is %s, want a string", name, shown(string(value)))}
}

// level finds, among the member names of one object, a repeated name or (fold set) one that
// differs only in case from another or from a name of fields (nil: no Go type's names).
type level struct {
	where    string
	fields   *fieldSet
	fold     bool
	seen     uint64       // the names of fields met, by index
	seenMore map[int]bool // past 63
	// others are the first names met that fields does not know; past those, byKey holds them all
	// by key (fold key when fold is set).
	others  [16][]byte
	nOthers int
	byKey   map[string][]byte
	buf     [64]byte
}

// add takes the next member's key (keyName; nil for invalid JSON, whose answer checkInput
// drops) and returns it, or an *InputError.
func (l *level) add(name []byte) ([]byte, error) {
	if name == nil {
		return nil, nil
	}
	if l.fields != nil {
		if i, ok := l.fields.index[string(name)]; ok {
			if l.markSeen(i) {
				return nil, l.repeated(name)
			}
			return name, nil
		}
		if l.fold {
			if n, ok := l.fields.fold[string(foldKey(l.buf[:0], name))]; ok {
				return nil, l.caseOf(name, []byte(n))
			}
		}
	}
	if l.byKey != nil {
		return name, l.addByKey(name)
	}
	for _, o := range l.others[:l.nOthers] {
		switch { // the last byte first: label keys often share a long prefix
		case len(o) == len(name) && (len(o) == 0 || o[len(o)-1] == name[len(o)-1]) && bytes.Equal(o, name):
			return nil, l.repeated(name)
		case l.fold && bytes.EqualFold(o, name):
			return nil, l.caseOf(name, o)
		}
	}
	if l.nOthers < len(l.others) {
		l.others[l.nOthers] = name
		l.nOthers++
		return name, nil
	}
	l.byKey = make(map[string][]byte, 2*len(l.others))
	for _, o := range l.others[:] { // a slice: ranging over the array would copy it onto the stack
		l.byKey[l.key(o)] = o
	}
	return name, l.addByKey(name)
}

// markSeen marks the field name numbered i and reports whether it was met before.
func (l *level) markSeen(i int) bool {
	if i < 64 {
		was := l.seen&(1<<i) != 0
		l.seen |= 1 << i
		return was
	}
	if l.seenMore == nil {
		l.seenMore = map[int]bool{}
	}
	was := l.seenMore[i]
	l.seenMore[i] = true
	return was
}

func (l *level) addByKey(name []byte) error {
	k := l.key(name)
	if o, ok := l.byKey[k]; ok {
		if bytes.Equal(o, name) {
			return l.repeated(name)
		}
		return l.caseOf(name, o)
	}
	l.byKey[k] = name
	return nil
}

func (l *level) key(name []byte) string {
	if l.fold {
		return string(foldKey(nil, name))
	}
	return string(name)
}

func (l *level) repeated(name []byte) error {
	return &InputError{Reason: l.prefix() + "key " + quoted(string(name)) + " appears more than once"}
}

func (l *level) caseOf(name, other []byte) error {
	return &InputError{Reason: l.prefix() + "key " + quoted(string(name)) + " differs only in case from " + quoted(string(other))}
}

func (l *level) prefix() string {
	if l.where == "" {
		return ""
	}
	return l.where + ": "
}

// foldKey appends to dst the fold key of name: two names have the same key exactly when
// bytes.EqualFold (and so encoding/json's field matching) takes them for the same. Each rune
// becomes the smallest rune of its Unicode simple folding orbit (ASCII letters: upper case;
// 'ſ' and the Kelvin sign: 'S' and 'K').
func foldKey(dst, name []byte) []byte {
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		dst = utf8.AppendRune(dst, smallestFold(r))
		i += n
	}
	return dst
}

// smallestFold returns the smallest rune of r's simple folding orbit.
func smallestFold(r rune) rune {
	min := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < min {
			min = f
		}
	}
	return min
}

// maxShown bounds a tenant's text quoted in a message.
const maxShown = 64

// quoted returns s as a Go string literal, cut to maxShown bytes ("..." after the quote).
func quoted(s string) string {
	if len(s) <= maxShown {
		return strconv.Quote(s)
	}
	return strconv.Quote(strings.ToValidUTF8(s[:maxShown], "")) + "..."
}

// shown returns s as it is when it is short plain text (letters, digits, '.', '-', '_', '/'),
// else quoted.
func shown(s string) string {
	if len(s) == 0 || len(s) > maxShown {
		return quoted(s)
	}
	for _, c := range []byte(s) {
		if !plainKeyByte(c) {
			return quoted(s)
		}
	}
	return s
}

// plainKeyByte reports whether c may stand unquoted in a key shown in an error: a letter, a
// digit, '.', '-', '_' or '/'.
func plainKeyByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '.' || c == '-' || c == '_' || c == '/'
}
