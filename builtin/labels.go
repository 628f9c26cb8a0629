package builtin

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
)

// Labels are the settings of the labels hook: labels and annotations to add to every object,
// overwriting the value of a key that is already there. The hook never removes anything.
type Labels struct {
	// Labels are added to metadata.labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to metadata.annotations.
	Annotations map[string]string `json:"annotations,omitempty"`
	// FromNamespace copies labels of the Namespace the object came from (LabelsFuncFor).
	FromNamespace *FromNamespace `json:"fromNamespace,omitempty"`
}

// LabelsFunc returns the mutate function of the labels hook: it sets every label and annotation
// of l on the object, creating metadata.labels and metadata.annotations when they are missing,
// and returns the same object. The maps of l are copied, so later changes to them have no
// effect. Keys and values are not validated here (the config package does that).
func LabelsFunc(l Labels) hooks.MutateFunc {
	labels, annotations := maps.Clone(l.Labels), maps.Clone(l.Annotations)
	return func(_ context.Context, obj client.Object) (client.Object, error) {
		if u, ok := obj.(runtime.Unstructured); ok {
			content := u.UnstructuredContent()
			if err := setStrings(content, "labels", labels); err != nil {
				return nil, err
			}
			if err := setStrings(content, "annotations", annotations); err != nil {
				return nil, err
			}
			u.SetUnstructuredContent(content)
			return obj, nil
		}
		if len(labels) > 0 {
			obj.SetLabels(merge(obj.GetLabels(), labels))
		}
		if len(annotations) > 0 {
			obj.SetAnnotations(merge(obj.GetAnnotations(), annotations))
		}
		return obj, nil
	}
}

// merge sets every entry of add in dst, creating dst when it is nil, and returns dst.
func merge(dst, add map[string]string) map[string]string {
	if dst == nil {
		dst = make(map[string]string, len(add))
	}
	maps.Copy(dst, add)
	return dst
}

// setStrings sets every entry of add in metadata.<field> of the unstructured content, working
// on the maps themselves so that entries that are not strings are kept as they are.
func setStrings(content map[string]any, field string, add map[string]string) error {
	if len(add) == 0 {
		return nil
	}
	metadata, err := childMap(content, "metadata", "metadata")
	if err != nil {
		return err
	}
	m, err := childMap(metadata, field, "metadata."+field)
	if err != nil {
		return err
	}
	for k, v := range add {
		m[k] = v
	}
	return nil
}

// childMap returns parent[key] as a map, creating it when it is missing or null. It fails when
// the value is something other than a JSON object; where names the field for the error.
func childMap(parent map[string]any, key, where string) (map[string]any, error) {
	switch v := parent[key].(type) {
	case map[string]any:
		return v, nil
	case nil:
		m := map[string]any{}
		parent[key] = m
		return m, nil
	default:
		return nil, fmt.Errorf("%s is a %T, not an object", where, v)
	}
}
