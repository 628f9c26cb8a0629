package engine

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSpliceAnnotationSetsTheKeyAndChangesNothingElse(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"kind":"Pod","metadata":{"name":"p","annotations":{"a":"b"}},"spec":{}}`, `{"kind":"Pod","metadata":{"name":"p","annotations":{"a":"b","k":"v\"<"}},"spec":{}}`},
		{`{"kind":"Pod","metadata":{"name":"p","annotations":{}}}`, `{"kind":"Pod","metadata":{"name":"p","annotations":{"k":"v\"<"}}}`},
		{`{"kind":"Pod","metadata":{"name":"p"}}`, `{"kind":"Pod","metadata":{"name":"p","annotations":{"k":"v\"<"}}}`},
		{`{"metadata":{}}`, `{"metadata":{"annotations":{"k":"v\"<"}}}`},
		{`{"metadata":{"annotations":{"k":"x"}}}`, ``},
		{`{"metadata":{"annotations":null}}`, ``},
		{`{"metadata":null}`, ``},
		{`{"spec":{}}`, ``},
	} {
		got := spliceAnnotation([]byte(tc.doc), "k", `v"<`)
		if tc.want == "" {
			if got != nil {
				t.Errorf("%s: %s, want nil", tc.doc, got)
			}
			continue
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %s is not JSON: %v", tc.doc, got, err)
		}
		_ = json.Unmarshal([]byte(tc.want), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s, want %s", tc.doc, got, tc.want)
		}
	}
}
