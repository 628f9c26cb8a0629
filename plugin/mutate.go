package plugin

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/intake"
	"github.com/synchook/synchook/internal/namespaces"
	"github.com/synchook/synchook/internal/sidecar"
)

// mutateDoc is one object of mutate's input: a non-empty document of the (multi-document) file.
type mutateDoc struct {
	json []byte
	// name says which document it is, for headers and errors: "document 2 of 3: v1/Pod
	// default/web".
	name string
	// plan is the request's plan (engine.Plan) when --explain asked for it.
	plan string
}

// yamlDocuments splits data at its "---" lines and returns each document that holds something
// (not empty, not only comments) as JSON, in order. A document that is JSON is taken as it is,
// numbers exact, as the server takes it (a YAML step would turn 12345678901234567890123 into
// 1.2345678901234568e+22); YAML is converted, a repeated key an error as in kubectl (the server
// refuses a repeated key in JSON too). what names the input in errors; an error names the
// document (counted without the empty ones).
func yamlDocuments(data []byte, what string) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		j := bytes.TrimSpace(doc)
		if len(j) == 0 || j[0] != '{' || !json.Valid(j) {
			if j, err = yaml.YAMLToJSONStrict(doc); err != nil { // a repeated key is an error, as in kubectl
				return nil, fmt.Errorf("%s: document %d is not YAML or JSON: %w", what, len(docs)+1, err)
			}
		}
		if string(j) == "null" { // empty, or only comments
			continue
		}
		docs = append(docs, j)
	}
}

// readMutateDocuments returns the objects of mutate's input data (from the file named what), all
// checked before any runs: each a JSON object with apiVersion and kind. A document that is a
// List (mutateListItems) stands for its items, each checked and run as a document of its own,
// in order; an empty List adds a note for stderr instead. Errors name the document ("document 2
// of 3") or the item ("document 1, item 2 (ns/b)") and are the caller's exit code 2.
func readMutateDocuments(data []byte, what string) (docs []mutateDoc, notes []string, err error) {
	raw, err := yamlDocuments(data, what)
	if err != nil {
		return nil, nil, err
	}
	if len(raw) == 0 {
		return nil, nil, fmt.Errorf("%s: no object (want YAML or JSON with apiVersion and kind)", what)
	}
	for i, j := range raw {
		n := fmt.Sprintf("document %d of %d", i+1, len(raw))
		if j[0] != '{' {
			return nil, nil, fmt.Errorf("%s: %s is not an object (a mapping with apiVersion and kind)", what, n)
		}
		items, isList, err := mutateListItems(j)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: a List: %w", what, n, err)
		}
		if !isList {
			gvk, id, err := mutateIdentity(j)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s: %w", what, n, err)
			}
			apiVersion, kind := gvk.ToAPIVersionAndKind()
			docs = append(docs, mutateDoc{json: j, name: fmt.Sprintf("%s: %s/%s %s", n, apiVersion, kind, cmp.Or(id, "(no name)"))})
			continue
		}
		if len(items) == 0 {
			notes = append(notes, fmt.Sprintf("%s: document %d: an empty List", what, i+1))
			continue
		}
		for k, item := range items {
			at := fmt.Sprintf("document %d, item %d", i+1, k+1)
			if len(item) == 0 || item[0] != '{' {
				return nil, nil, fmt.Errorf("%s: %s is not an object (a mapping with apiVersion and kind)", what, at)
			}
			gvk, id, err := mutateIdentity(item)
			if err != nil {
				if id != "" {
					at += " (" + id + ")"
				}
				return nil, nil, fmt.Errorf("%s: %s: %w", what, at, err)
			}
			apiVersion, kind := gvk.ToAPIVersionAndKind()
			at += " (" + strings.TrimSpace(apiVersion+"/"+kind+" "+id) + ")"
			if _, nested, _ := mutateListItems(item); nested {
				return nil, nil, fmt.Errorf("%s: %s: a List inside a List: give its items in the outer List", what, at)
			}
			docs = append(docs, mutateDoc{json: item, name: at})
		}
	}
	return docs, notes, nil
}

// mutateIdentity reads the object j's apiVersion and kind (an error without them) and its
// "namespace/name" (empty when it has neither).
func mutateIdentity(j []byte) (schema.GroupVersionKind, string, error) {
	var meta struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(j, &meta) // a metadata of another shape names nothing
	gvk, err := engine.ObjectGVK(j)
	if meta.Metadata.Name == "" && meta.Metadata.Namespace == "" {
		return gvk, "", err
	}
	id := cmp.Or(meta.Metadata.Name, "(no name)")
	if meta.Metadata.Namespace != "" {
		id = meta.Metadata.Namespace + "/" + id
	}
	return gvk, id, err
}

// mutateListItems returns the items of the document j (a JSON object) and true when j is a
// list as kubectl's resource builder flattens one: kind List (v1 List, what kubectl get -o yaml
// prints for several objects), or a kind ending in List whose items is an array (PodList, as
// the API server sends it). The items of such a kind's list that have neither apiVersion nor
// kind get the list's apiVersion and the item kind (v1 PodList: v1 Pod), as apimachinery's
// UnstructuredList decode gives them and the engine's list path does; the items are the
// document's bytes, numbers and member order as they are. It returns false for any other
// document, and an error for a List whose items is not an array.
func mutateListItems(j []byte) ([][]byte, bool, error) {
	var head struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Items      json.RawMessage `json:"items"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &head); err != nil || !strings.HasSuffix(head.Kind, "List") {
		return nil, false, nil // not a list; the object's own check names what is wrong with it
	}
	itemGVK, typed := schema.GroupVersionKind{}, false
	if head.Kind != "List" {
		if !bytes.HasPrefix(bytes.TrimSpace(head.Items), []byte("[")) {
			return nil, false, nil // an object whose kind ends in List, not a list of objects
		}
		if gv, err := schema.ParseGroupVersion(head.APIVersion); err == nil {
			itemGVK, typed = engine.ListItemGVK(gv.WithKind(head.Kind))
		}
	}
	items, err := intake.ListItems(j, true) // yamlDocuments gave valid JSON
	if err != nil {
		return nil, true, err
	}
	if typed {
		for k, item := range items {
			// Only an item with neither (an object; ItemIdentity says so) takes the list's kind.
			if id, err := intake.ItemIdentity(item, itemGVK); err == nil {
				items[k] = id.WithTypeMeta(item, itemGVK)
			}
		}
	}
	return items, true, nil
}

// mutateNamespaces are mutate's namespaces (--namespaces FILE), the only ones there are: a hook
// that reads another fails that document, with an error naming the namespace and saying where
// to give it.
type mutateNamespaces struct {
	static namespaces.Static
	hint   string
}

// Get implements namespaces.Lookup.
func (n mutateNamespaces) Get(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := n.static.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, n.hint)
	}
	return ns, nil
}

// readMutateNamespaces reads the --namespaces file path: Namespace objects (apiVersion v1),
// YAML or JSON, one a document or as the items of a List (kubectl get namespaces -o yaml) or a
// NamespaceList (the API's, items without apiVersion and kind), read by mutateListItems as -f's
// are. No path: no namespaces. Errors name the document and item (from 1).
func readMutateNamespaces(path string) (mutateNamespaces, error) {
	if path == "" {
		return mutateNamespaces{static: namespaces.Static{}, hint: "synchook mutate reads no cluster: give the Namespace with --namespaces FILE"}, nil
	}
	n := mutateNamespaces{static: namespaces.Static{}, hint: "--namespaces " + path + " does not hold it"}
	data, err := os.ReadFile(path)
	if err != nil {
		return n, err
	}
	docs, err := yamlDocuments(data, path)
	if err != nil {
		return n, err
	}
	add := func(where string, j []byte) error {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(j, &tm); err != nil {
			return fmt.Errorf("%s: %s: not an object: %w", path, where, err)
		}
		if tm.APIVersion != "v1" || tm.Kind != "Namespace" {
			return fmt.Errorf("%s: %s: apiVersion %q kind %q, want v1 Namespace", path, where, tm.APIVersion, tm.Kind)
		}
		ns := &corev1.Namespace{}
		if err := yaml.UnmarshalStrict(j, ns); err != nil {
			return fmt.Errorf("%s: %s: %w", path, where, err)
		}
		if ns.Name == "" {
			return fmt.Errorf("%s: %s: a Namespace without metadata.name", path, where)
		}
		if n.static[ns.Name] != nil {
			return fmt.Errorf("%s: %s: namespace %q given twice", path, where, ns.Name)
		}
		n.static[ns.Name] = ns
		return nil
	}
	for i, j := range docs {
		where := fmt.Sprintf("document %d", i+1)
		items, isList, err := mutateListItems(j) // a List as mutate's -f reads one
		if err != nil {
			return n, fmt.Errorf("%s: %s: a List: %w", path, where, err)
		}
		if !isList {
			if err := add(where, j); err != nil {
				return n, err
			}
			continue
		}
		for k, item := range items {
			if err := add(fmt.Sprintf("%s, item %d", where, k+1), item); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// mutateDocuments runs the chain of hookType on every document in order, each with its own
// timeout, and returns the results, or the errors of the documents that failed, each naming
// its document. explain sets each document's plan first (engine.Registry.Explain).
func mutateDocuments(ctx context.Context, reg *engine.Registry, hookType hooks.HookType, docs []mutateDoc, timeout time.Duration, explain bool) ([]*sidecar.MutateResult, error) {
	results := make([]*sidecar.MutateResult, len(docs))
	var errs []error
	for i, d := range docs {
		if explain {
			gvk, _ := engine.ObjectGVK(d.json) // readMutateDocuments read it
			plan, err := reg.Explain(gvk, hookType, d.json)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
				continue
			}
			docs[i].plan = "# Plan\n# " + strings.ReplaceAll(strings.TrimSuffix(plan.String(), "\n"), "\n", "\n# ") + "\n"
		}
		res, err := sidecar.Mutate(ctx, reg, hookType, d.json, timeout)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
			continue
		}
		results[i] = res
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return results, nil
}

// writeMutateResults renders the results of docs as mutate's output o: "json" one object a line,
// "yaml" the objects as YAML documents, "" for people each document's JSON Patch and result,
// under a header naming the document when there are several. It renders everything before it
// writes anything.
func writeMutateResults(w io.Writer, o string, hookType hooks.HookType, docs []mutateDoc, results []*sidecar.MutateResult) error {
	var out bytes.Buffer
	for i, res := range results {
		switch o {
		case "json":
			fmt.Fprintf(&out, "%s\n", res.Object)
			continue
		case "yaml":
			y, err := yaml.JSONToYAML(res.Object)
			if err != nil {
				return fmt.Errorf("render the result of %s: %w", docs[i].name, err)
			}
			if i > 0 {
				out.WriteString("---\n")
			}
			out.Write(y)
			continue
		}
		patchText := "[]"
		if res.Patch != nil {
			patchText = string(res.Patch)
		}
		result, err := yaml.JSONToYAML(res.Object)
		if err != nil {
			return fmt.Errorf("render the result of %s: %w", docs[i].name, err)
		}
		if len(results) > 1 {
			if i > 0 {
				out.WriteString("---\n")
			}
			fmt.Fprintf(&out, "# %s\n", strings.ReplaceAll(docs[i].name, "\n", " "))
		}
		fmt.Fprintf(&out, "%s# JSON Patch (%s, hooks run: %d)\n%s\n---\n# Result\n%s", docs[i].plan, hookType, res.Hooks, patchText, result)
	}
	_, err := w.Write(out.Bytes())
	return err
}
