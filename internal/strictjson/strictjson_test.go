package strictjson_test

import (
	"strings"
	"testing"

	"github.com/synchook/synchook/internal/strictjson"
)

type entry struct {
	Name   string            `json:"name"`
	Types  []string          `json:"types"`
	Labels map[string]string `json:"labels"`
	Count  int               `json:"count"`
}

func TestUnmarshalNamesEachProblemByItsPlace(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"an unknown key, with the valid ones", `{"naem":"x"}`, `hooks[0]: unknown field "naem" (valid: count, labels, name, types)`},
		{"a string where a list belongs", `{"types":"CreatePhysical"}`, `hooks[0].types: a string, want a list`},
		{"a list where a map's string value belongs", `{"labels":{"a":["x"]}}`, `hooks[0].labels: a list, want a string`},
		{"a string where a number belongs", `{"count":"three"}`, `hooks[0].count: a string, want a number`},
		{"a duplicate key", `{"name":"a","name":"b"}`, `hooks[0]: duplicate field "name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e entry
			errs := strictjson.Unmarshal([]byte(tc.json), &e, "hooks[0]")
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("errors %v, want one containing %q", errs, tc.want)
			}
		})
	}
}
