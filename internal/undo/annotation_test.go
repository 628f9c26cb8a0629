package undo

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSpliceAnnotationSetsTheKeyAndChangesNothingElse(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"kind":"Pod","metadata":{"name":"p","annotations":{"a":"b"}},"spec":{}}`, `{"kind":"Pod","metadata":{"name":"p","annotations":{"a":"b","synchook.io/undo":"v\"<"}},"spec":{}}`},
		{`{"kind":"Pod","metadata":{"name":"p","annotations":{}}}`, `{"kind":"Pod","metadata":{"name":"p","annotations":{"synchook.io/undo":"v\"<"}}}`},
		{`{"kind":"Pod","metadata":{"name":"p"}}`, `{"kind":"Pod","metadata":{"name":"p","annotations":{"synchook.io/undo":"v\"<"}}}`},
		{`{"metadata":{}}`, `{"metadata":{"annotations":{"synchook.io/undo":"v\"<"}}}`},
		{`{"metadata":{"annotations":{"synchook.io/undo":"x"}}}`, ``},
		{`{"metadata":{"annotations":null}}`, ``},
		{`{"metadata":null}`, ``},
		{`{"spec":{}}`, ``},
	} {
		got := SpliceAnnotation([]byte(tc.doc), `v"<`)
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
