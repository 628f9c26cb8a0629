package policy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ErrInvalid is wrapped by every error of Parse, ParseFile and Compile about the content of a
// policy (syntax, unknown fields, unsupported features, CEL that does not compile); test for
// it with errors.Is.
var ErrInvalid = errors.New("invalid MutatingAdmissionPolicy")

// APIVersion and Kind are the only apiVersion and kind Parse accepts.
const (
	APIVersion = "admissionregistration.k8s.io/v1"
	Kind       = "MutatingAdmissionPolicy"
)

// Parse decodes one MutatingAdmissionPolicy manifest, YAML or JSON, strictly: unknown fields
// (compared case-sensitively) and duplicate fields are errors naming them, e.g.
// `unknown field "spec.mutations[0].jsonpatch"`; apiVersion must be
// admissionregistration.k8s.io/v1 and kind MutatingAdmissionPolicy; the manifest must hold
// exactly one YAML document. It does not validate the spec (Compile does). Errors wrap
// ErrInvalid.
func Parse(manifest []byte) (*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	doc, err := oneDocument(manifest)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	p := &admissionregistrationv1.MutatingAdmissionPolicy{}
	if err := decodeManifest(js, Kind, p); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeManifest decodes the JSON manifest js strictly into v, after checking that its
// apiVersion is APIVersion and its kind is kind. Errors wrap ErrInvalid.
func decodeManifest(js []byte, kind string, v any) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &head); err != nil {
		return invalidf("%w", err)
	}
	if head.APIVersion != APIVersion || head.Kind != kind {
		return invalidf("apiVersion %q, kind %q: want apiVersion %s, kind %s", head.APIVersion, head.Kind, APIVersion, kind)
	}
	strict, err := kjson.UnmarshalStrict(js, v)
	if err != nil {
		return invalidf("%w", err)
	}
	if len(strict) > 0 {
		return invalidf("%w", utilerrors.NewAggregate(strict))
	}
	return nil
}

// ParseFile reads the manifest at path and Parses it; errors name the path. An error reading
// the file does not wrap ErrInvalid.
func ParseFile(path string) (*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// oneDocument returns the only non-empty YAML document of data (a JSON object is one).
func oneDocument(data []byte) ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var found []byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if isEmptyDocument(doc) {
			continue
		}
		if found != nil {
			return nil, errors.New("the manifest holds more than one YAML document")
		}
		found = doc
	}
	if found == nil {
		return nil, errors.New("the manifest is empty")
	}
	return found, nil
}

// isEmptyDocument reports whether doc holds only blank lines and comments.
func isEmptyDocument(doc []byte) bool {
	for line := range strings.SplitSeq(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return false
		}
	}
	return true
}

// invalidf returns an error wrapping ErrInvalid with the formatted message.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// BindingKind is the only kind ParseBinding accepts (apiVersion APIVersion).
const BindingKind = "MutatingAdmissionPolicyBinding"

// ParseBinding decodes one MutatingAdmissionPolicyBinding manifest, YAML or JSON, as strictly
// as Parse; it does not validate the spec (CompileWithOptions does). Errors wrap ErrInvalid.
func ParseBinding(manifest []byte) (*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	js, err := yaml.YAMLToJSONStrict(manifest)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	if err := decodeManifest(js, BindingKind, b); err != nil {
		return nil, err
	}
	return b, nil
}

// ParseParam decodes one param object, YAML or JSON: apiVersion, kind and metadata.name are
// required. Errors wrap ErrInvalid.
func ParseParam(manifest []byte) (*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSONStrict(manifest)
	if err != nil {
		return nil, invalidf("%w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, invalidf("%w", err)
	}
	if u.GetName() == "" {
		return nil, invalidf("metadata.name: Required value")
	}
	return u, nil
}
