package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/synchook/synchook/internal/policyreg"
)

// extraObject is a param every policy entry gets after its own (Config.AddParams), or a
// binding the entry of the policy it names gets after its own (Config.AddBindings), with where
// it came from.
type extraObject struct {
	data  []byte
	where string
}

// AddParams adds param objects (YAML or JSON, one each) that every policy entry's bindings
// select from after the entry's own params (and paramsFile), where[i] saying where params[i]
// came from in errors: synchook test's params:, the params a test file says the cluster holds
// ("test file x.yaml: params[0]"). Call it before Build, which validates them with each
// policy entry; the load-time idempotency self-test and every request see them as the
// config's own.
func (c *Config) AddParams(params [][]byte, where []string) {
	c.extraParams = appendExtra(c.extraParams, "params", params, where)
}

// AddBindings adds MutatingAdmissionPolicyBindings (YAML or JSON, one each), each to the
// policy entry whose policy its spec.policyName names, after the entry's own bindings (and
// bindingsFile), where[i] saying where bindings[i] came from in errors: synchook test's
// bindings:, the bindings a test file says the cluster holds. Build refuses one that names no
// policy of the config.
func (c *Config) AddBindings(bindings [][]byte, where []string) {
	c.extraBindings = appendExtra(c.extraBindings, "bindings", bindings, where)
}

// appendExtra appends data to to, each named where[i] in errors, else key[n] by its place.
func appendExtra(to []extraObject, key string, data [][]byte, where []string) []extraObject {
	for i, d := range data {
		w := fmt.Sprintf("%s[%d]", key, len(to))
		if i < len(where) {
			w = where[i]
		}
		to = append(to, extraObject{data: d, where: w})
	}
	return to
}

// extraBindingsOf adds to src the extra bindings (AddBindings) that name the entry's policy
// (its manifest's metadata.name), marking them used, and returns them (for the revision).
func (v *validator) extraBindingsOf(src *policyreg.Source) [][]byte {
	if len(v.extraBindings) == 0 {
		return nil
	}
	manifest := src.Manifest
	if src.File != "" {
		data, err := os.ReadFile(src.File)
		if err != nil {
			return nil // the compiler reports it
		}
		manifest = data
	}
	var policy struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(manifest, &policy); err != nil || policy.Metadata.Name == "" {
		return nil // the compiler reports it
	}
	var added [][]byte
	for i, e := range v.extraBindings {
		if bindingPolicyName(e.data) == policy.Metadata.Name {
			src.Bindings, src.BindingsAt = append(src.Bindings, e.data), append(src.BindingsAt, e.where)
			v.usedBindings[i] = true
			added = append(added, e.data)
		}
	}
	return added
}

// bindingPolicyName returns the spec.policyName of the binding data (YAML or JSON), "" when it
// has none.
func bindingPolicyName(data []byte) string {
	var b struct {
		Spec struct {
			PolicyName string `json:"policyName"`
		} `json:"spec"`
	}
	_ = yaml.Unmarshal(data, &b) // one that does not decode names no policy: unusedBindings says so
	return b.Spec.PolicyName
}

// unusedBindings refuses the extra bindings (AddBindings) no policy entry took.
func (v *validator) unusedBindings() {
	for i, e := range v.extraBindings {
		if !v.usedBindings[i] {
			v.errs = append(v.errs, field.Invalid(field.NewPath("hooks"), bindingPolicyName(e.data),
				e.where+": spec.policyName names no policy of the config's policy entries (a MutatingAdmissionPolicyBinding with the metadata.name of one)"))
		}
	}
}

// policyFiles adds to src the bindings of the entry's bindingsFile and the params of its
// paramsFile (each resolved as policyFile is: relative to the config file's directory, an
// error in an inline config), every document of each (readDocuments) after the entry's inline
// ones, labelled with the file and document for errors; their contents go into the entry's
// revision; then the config's extra bindings that name its policy (AddBindings) and extra
// params (AddParams). A problem is recorded at the key; it
// returns false when there was one.
func (v *validator) policyFiles(p *field.Path, h *Hook, src *policyreg.Source) bool {
	ok := true
	h.filesData = nil
	for i := range src.Bindings {
		src.BindingsAt = append(src.BindingsAt, fmt.Sprintf("bindings[%d]", i))
	}
	for i := range src.Params {
		src.ParamsAt = append(src.ParamsAt, fmt.Sprintf("params[%d]", i))
	}
	defer func() {
		h.filesData = append(h.filesData, v.extraBindingsOf(src)...)
		for _, e := range v.extraParams {
			src.Params, src.ParamsAt = append(src.Params, e.data), append(src.ParamsAt, e.where)
			h.filesData = append(h.filesData, e.data)
		}
	}()
	for _, f := range []struct {
		key, name string
		inline    bool
		docs      *[][]byte
		at        *[]string
		item      string
	}{
		{"bindingsFile", h.BindingsFile, h.Bindings != nil, &src.Bindings, &src.BindingsAt, "bindings"},
		{"paramsFile", h.ParamsFile, h.Params != nil, &src.Params, &src.ParamsAt, "params"},
	} {
		if f.name == "" {
			continue
		}
		where := p.Child(f.key)
		if f.inline {
			v.errs = append(v.errs, field.Forbidden(where, fmt.Sprintf("%s and %s cannot both be set: give the %s in one of them", f.item, f.key, f.item)))
			ok = false
			continue
		}
		read := v.readFile
		if read == nil {
			read = os.ReadFile
		}
		var data []byte
		file, err := v.source.resolve(f.name)
		if err == nil {
			data, err = read(file)
		}
		if err != nil { // the file cannot be resolved or read
			v.errs = append(v.errs, field.Invalid(where, field.OmitValueType{}, err.Error()))
			ok = false
			continue
		}
		docs, labels, err := readDocuments(data)
		if err != nil {
			v.errs = append(v.errs, field.Invalid(where, field.OmitValueType{}, fmt.Sprintf("%s: %v", f.name, err)))
			ok = false
			continue
		}
		h.filesData = append(h.filesData, data)
		for i, d := range docs {
			*f.docs = append(*f.docs, d)
			*f.at = append(*f.at, fmt.Sprintf("%s %s: %s (%s[%d])", f.key, f.name, labels[i], f.item, i))
		}
	}
	return ok
}

// readDocuments splits data, a YAML (or JSON) file, into its objects: one per document, or
// one per item of a document that is a v1 List; documents that are empty or hold only
// comments are skipped. It returns the objects (as JSON) with where each is ("document 2",
// "document 1 items[3]"; documents count from 1), or an error naming the document that is
// not a YAML mapping (or a List whose items are not a list of mappings).
func readDocuments(data []byte) ([][]byte, []string, error) {
	var docs [][]byte
	var where []string
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", n, err)
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", n, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue
		}
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Items      []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			return nil, nil, fmt.Errorf("document %d: not an object (a YAML mapping with apiVersion and kind): %w", n, err)
		}
		if head.APIVersion != "v1" || head.Kind != "List" {
			docs, where = append(docs, js), append(where, fmt.Sprintf("document %d", n))
			continue
		}
		for i, item := range head.Items {
			docs, where = append(docs, item), append(where, fmt.Sprintf("document %d items[%d]", n, i))
		}
	}
	return docs, where, nil
}
