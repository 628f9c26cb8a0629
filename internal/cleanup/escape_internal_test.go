package cleanup

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestReportEscapesTenantText(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "cm", field.ErrorList{
		field.Invalid(field.NewPath("data").Key("k\nFAILED forged\x1b[2J"), "the-secret-value", "a valid config key"),
	})
	for _, tc := range []struct {
		name, got, want string
	}{
		{"a path is quoted with its control characters escaped", quote("/x\n\x1b[2J\u202e"), `"/x\n\x1b[2J\u202e"`},
		{"a plain name stays as it is", plainName("web-0.ns_1"), "web-0.ns_1"},
		{"a name with a newline is quoted", plainName("a\nb"), `"a\nb"`},
		{"an empty name is quoted", plainName(""), `""`},
		{"an error text keeps printable text and escapes the rest", escapeControls("ok: é \\ \n\x1b[2J\xff\u202e"), `ok: é \ \n\x1b[2J\xff\u202e`},
		{
			"an API error gives its reason, code and quoted field paths, no values",
			describeError(fmt.Errorf("update: %w", invalid)), `update: Invalid (422); "data[k\nFAILED forged\x1b[2J]": FieldValueInvalid`,
		},
		{"another error has its control characters escaped", describeError(errors.New("decode\n\x1b[2J")), `decode\n\x1b[2J`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got  %s\nwant %s", tc.got, tc.want)
			}
			if strings.ContainsAny(tc.got, "\n\x1b\u202e") || strings.Contains(tc.got, "the-secret-value") {
				t.Errorf("%q holds a raw control character or a field value", tc.got)
			}
		})
	}
}
