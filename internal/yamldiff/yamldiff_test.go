package yamldiff_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/yamldiff"
)

func TestValuesIsAUnifiedYAMLDiffOrNothing(t *testing.T) {
	a := map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web", "team": "b"}, "name": "web"}, "n": json.Number("1")}
	b := map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web", "team": "a"}, "name": "web"}, "n": json.Number("1")}
	for _, tt := range []struct {
		name string
		a, b any
		want []string // none: no diff
	}{
		{name: "equal values give no diff", a: a, b: a},
		{
			name: "a changed field shows as a removed and an added YAML line, with context",
			a:    a, b: b,
			want: []string{"--- expected\n+++ got\n@@ ", "\n     app: web\n", "\n-    team: b\n+    team: a\n", "\n   name: web\n"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := yamldiff.Values(tt.a, tt.b, "expected", "got")
			if len(tt.want) == 0 {
				if got != "" {
					t.Fatalf("diff of equal values:\n%s", got)
				}
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("diff lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
