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
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
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
// checked before any runs: each a JSON object with apiVersion and kind. Errors name the document
// ("document 2 of 3") and are the caller's exit code 2.
func readMutateDocuments(data []byte, what string) ([]mutateDoc, error) {
	raw, err := yamlDocuments(data, what)
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: no object (want YAML or JSON with apiVersion and kind)", what)
	}
	docs := make([]mutateDoc, len(raw))
	for i, j := range raw {
		n := fmt.Sprintf("document %d of %d", i+1, len(raw))
		if j[0] != '{' {
			return nil, fmt.Errorf("%s: %s is not an object (a mapping with apiVersion and kind)", what, n)
		}
		gvk, err := engine.ObjectGVK(j)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", what, n, err)
		}
		var meta struct {
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(j, &meta) // ObjectGVK read it: an object; a metadata of another shape names nothing
		name := cmp.Or(meta.Metadata.Name, "(no name)")
		if meta.Metadata.Namespace != "" {
			name = meta.Metadata.Namespace + "/" + name
		}
		apiVersion, kind := gvk.ToAPIVersionAndKind()
		docs[i] = mutateDoc{json: j, name: fmt.Sprintf("%s: %s/%s %s", n, apiVersion, kind, name)}
	}
	return docs, nil
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
// YAML or JSON, one a document or as the items of a List (kubectl get namespaces -o yaml). No
// path: no namespaces. Errors name the document and item.
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
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(j, &list); err == nil && (list.Kind == "List" || list.Kind == "NamespaceList") {
			for k, item := range list.Items {
				if err := add(fmt.Sprintf("%s, items[%d]", where, k), item); err != nil {
					return n, err
				}
			}
			continue
		}
		if err := add(where, j); err != nil {
			return n, err
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
