package builtin

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/jsondoc"
	"github.com/synchook/synchook/internal/jsonfield"
)

// The strip hook as it was before issue 42 (221e037), kept as the oracle of FuzzStripAsBefore:
// each Wildcard expanded into one concrete path per element (ExpandPath), each removed from
// the root, an array rebuilt per removed element.

// stripBefore is the mutate function StripFunc returned before issue 42, without its context.
func stripBefore(obj client.Object, paths [][]string) (client.Object, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		content := u.UnstructuredContent()
		if removeAllBefore(content, paths) {
			u.SetUnstructuredContent(content)
		}
		return obj, nil
	}
	root := reflect.ValueOf(obj)
	for i, tokens := range paths {
		for _, concrete := range expandBefore(tokens, func(prefix []string) (int, bool) { return typedLenBefore(root, prefix) }) {
			if !stripValueBefore(root, concrete) {
				return stripTypedBefore(obj, paths[i:])
			}
		}
	}
	return obj, nil
}

func stripValueBefore(v reflect.Value, tokens []string) bool {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	if selfEncoding(v.Type()) {
		return false
	}
	tok, rest := tokens[0], tokens[1:]
	switch v.Kind() {
	case reflect.Struct:
		f, ok := jsonfield.Named(v.Type(), tok)
		if !ok {
			return true
		}
		fv := f.Value(v)
		if !fv.IsValid() {
			return true
		}
		if len(rest) == 0 {
			fv.SetZero()
			return true
		}
		return stripValueBefore(fv, rest)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String || selfEncoding(v.Type().Key()) {
			return false
		}
		key := reflect.ValueOf(tok).Convert(v.Type().Key())
		ev := v.MapIndex(key)
		if !ev.IsValid() {
			return true
		}
		if len(rest) == 0 {
			v.SetMapIndex(key, reflect.Value{})
			return true
		}
		c := reflect.New(ev.Type()).Elem()
		c.Set(ev)
		if !stripValueBefore(c, rest) {
			return false
		}
		v.SetMapIndex(key, c)
		return true
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return true
		}
		i, ok := arrayIndex(tok, v.Len())
		if !ok {
			return true
		}
		if len(rest) == 0 {
			out := reflect.MakeSlice(v.Type(), 0, v.Len()-1)
			out = reflect.AppendSlice(out, v.Slice(0, i))
			v.Set(reflect.AppendSlice(out, v.Slice(i+1, v.Len())))
			return true
		}
		return stripValueBefore(v.Index(i), rest)
	case reflect.Interface:
		return false
	}
	return true
}

func stripTypedBefore(obj client.Object, paths [][]string) (client.Object, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if !removeAllBefore(content, paths) {
		return obj, nil
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, out); err != nil {
		return nil, err
	}
	return out, nil
}

func removeAllBefore(doc map[string]any, paths [][]string) bool {
	removed := false
	for _, tokens := range paths {
		for _, concrete := range expandBefore(tokens, func(prefix []string) (int, bool) {
			v, _ := jsondoc.LookupValue(doc, prefix)
			a, ok := v.([]any)
			return len(a), ok
		}) {
			if _, ok := removeBefore(doc, concrete); ok {
				removed = true
			}
		}
	}
	return removed
}

func expandBefore(tokens []string, lenAt func(prefix []string) (int, bool)) [][]string {
	if !hasWildcard(tokens) {
		return [][]string{tokens}
	}
	return ExpandPath(tokens, lenAt)
}

func typedLenBefore(v reflect.Value, prefix []string) (int, bool) {
	for i := 0; ; i++ {
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				return 0, false
			}
			v = v.Elem()
		}
		if selfEncoding(v.Type()) {
			return 0, false
		}
		if i == len(prefix) {
			if v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8 {
				return v.Len(), true
			}
			return 0, false
		}
		switch tok := prefix[i]; v.Kind() {
		case reflect.Struct:
			f, ok := jsonfield.Named(v.Type(), tok)
			if !ok {
				return 0, false
			}
			if v = f.Value(v); !v.IsValid() {
				return 0, false
			}
		case reflect.Map:
			if v.Type().Key().Kind() != reflect.String {
				return 0, false
			}
			if v = v.MapIndex(reflect.ValueOf(tok).Convert(v.Type().Key())); !v.IsValid() {
				return 0, false
			}
		case reflect.Slice:
			j, ok := arrayIndex(tok, v.Len())
			if !ok {
				return 0, false
			}
			v = v.Index(j)
		default:
			return 0, false
		}
	}
}

func removeBefore(node any, tokens []string) (any, bool) {
	tok, rest := tokens[0], tokens[1:]
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tok]
		if !ok {
			return node, false
		}
		if len(rest) == 0 {
			delete(n, tok)
			return n, true
		}
		newChild, removed := removeBefore(child, rest)
		if removed {
			n[tok] = newChild
		}
		return n, removed
	case []any:
		i, ok := arrayIndex(tok, len(n))
		if !ok {
			return node, false
		}
		if len(rest) == 0 {
			out := make([]any, 0, len(n)-1)
			out = append(out, n[:i]...)
			return append(out, n[i+1:]...), true
		}
		newChild, removed := removeBefore(n[i], rest)
		if removed {
			n[i] = newChild
		}
		return n, removed
	default:
		return node, false
	}
}

// FuzzStripAsBefore strips paths the fuzzer gives (Wildcards included) from a Pod it gives,
// typed and unstructured, with StripFunc and with the strip as it was before issue 42
// (stripBefore): a typed Pod must give the same JSON, an Unstructured the same tree (an array
// emptied by a Wildcard is [] in both, never null).
func FuzzStripAsBefore(f *testing.F) {
	pod := fixtures.JSON(fixtures.Pod("ns", "web"))
	for _, p := range [][2]string{
		{"/spec/tolerations/*", "/spec/containers/*/env/*/valueFrom"},
		{"/spec/containers/*/ports/*", "/spec/containers/*/resources/limits/cpu"},
		{"/spec/containers/*/resources/limits/cpu/x", "/metadata/labels/*"},
		{"/spec/containers/*/env/*", "/spec/containers/*"},
		{"/spec/volumes/*/name", "/spec/containers/0/env/*/name"},
		{"/spec/containers/*/env/0", "/spec/containers/*/args/*"},
		{"/metadata/creationTimestamp/*", "/spec/*/x"},
		{"/metadata/ownerReferences/*/uid", "/status/conditions/*/lastTransitionTime"},
	} {
		f.Add(pod, p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, raw []byte, path1, path2 string) {
		var paths [][]string
		for _, p := range []string{path1, path2} {
			tokens, err := parseStripPath(p)
			if err != nil || len(tokens) == 0 {
				t.Skip()
			}
			paths = append(paths, tokens)
		}
		in := &corev1.Pod{}
		if json.Unmarshal(raw, in) != nil {
			t.Skip()
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
		if err != nil {
			t.Skip() // the unstructured converter refuses the object
		}
		fn, err := StripFunc(Strip{Paths: []string{path1, path2}})
		if err != nil {
			t.Fatal(err)
		}
		want, werr := stripBefore(in.DeepCopy(), paths)
		got, gerr := fn(t.Context(), in.DeepCopy())
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("typed: error %v, before %v", gerr, werr)
		}
		if werr == nil {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Fatalf("typed strip %s %s gives\n%s\nbefore issue 42\n%s", path1, path2, g, w)
			}
		}

		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(content)}
		wu := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(content)}
		if _, err := fn(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		if _, err := stripBefore(wu, paths); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(u.Object, wu.Object) { // [] and null told apart
			t.Fatalf("unstructured strip %s %s gives\n%v\nbefore issue 42\n%v", path1, path2, u.Object, wu.Object)
		}
	})
}
