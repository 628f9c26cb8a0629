package canary

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestEveryLeakIsFoundWhereItWouldShow checks the search itself: the text of every leak's
// failure, as it is and inside a JSON document and a quoted log field, holds a form of the
// value, so a test that finds none in synchook's output has really kept the leak out.
func TestEveryLeakIsFoundWhereItWouldShow(t *testing.T) {
	for i, l := range Leaks {
		t.Run(l.Name, func(t *testing.T) {
			text := l.Cause(Secret(i)).Error()
			inJSON, _ := json.Marshal(map[string]string{"message": "hook failed: " + text})
			for where, s := range map[string]string{
				"the message":         text,
				"a JSON document":     string(inJSON),
				"a quoted log field":  fmt.Sprintf("error=%q", text),
				"JSON in a log field": fmt.Sprintf("%q", inJSON),
			} {
				if !Contains(s, Value) {
					t.Errorf("%s holds no form of the value: %s", where, s)
				}
			}
		})
	}
}

func TestFormsAreTheEncodingsOfTheValue(t *testing.T) {
	b := []byte(Value)
	cases := []struct {
		name, text string
	}{
		{"decimal bytes are found inside a printed slice", fmt.Sprintf("x %v y", b)},
		{"Go syntax bytes are found inside a printed slice", fmt.Sprintf("x %#v y", b)},
		{"upper-case hex is found", fmt.Sprintf("%X", b)},
		{"a Go-quoted value is found", fmt.Sprintf("%q", Value)},
		{"a Go-quoted value in JSON is found", func() string { j, _ := json.Marshal(fmt.Sprintf("%q", Value)); return string(j) }()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !Contains(tc.text, Value) {
				t.Errorf("no form found in %s", tc.text)
			}
		})
	}
	t.Run("a text without the value holds none of its forms", func(t *testing.T) {
		clean := `hook "leaky" UpdatePhysical Secret: the hook failed on a Secret; its message is withheld (detail 0123456789abcdef)`
		if found := Find(clean, Value); len(found) > 0 {
			t.Errorf("found %s", strings.Join(found, ", "))
		}
	})
}
