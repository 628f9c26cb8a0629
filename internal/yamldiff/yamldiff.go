// Package yamldiff is the one diff synchook's commands print where two objects differ
// (`synchook replay`, `synchook test`): both rendered as YAML (keys sorted), compared line by
// line, as a unified diff with three lines of context (github.com/pmezard/go-difflib).
package yamldiff

import (
	"encoding/json"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"
)

// Unified returns the unified line diff from the text a to the text b, headed "--- from" and
// "+++ to", with three lines of context; "" when they are equal.
func Unified(a, b, from, to string) string {
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: from, ToFile: to, Context: 3,
	})
	if err != nil {
		return err.Error()
	}
	return text
}

// Values returns Unified of the JSON values a and b (decoded JSON: maps, lists, strings,
// json.Number, …) rendered as YAML; "" when the renderings are equal.
func Values(a, b any, from, to string) string {
	return Unified(Render(a), Render(b), from, to)
}

// Render returns the JSON value v as YAML, keys sorted; a value that does not encode as JSON
// is rendered as its error.
func Render(v any) string {
	j, err := json.Marshal(v)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return string(j) + "\n"
	}
	return string(y)
}
