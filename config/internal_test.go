package config

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/synchook/synchook/internal/strictjson"
)

func TestHookEntryMatchesHook(t *testing.T) {
	entry, hook := strictjson.Fields(reflect.TypeFor[hookEntry]()), strictjson.Fields(reflect.TypeFor[Hook]())
	if got, want := slices.Sorted(maps.Keys(entry)), slices.Sorted(maps.Keys(hook)); !slices.Equal(got, want) {
		t.Fatalf("hookEntry keys %q, Hook keys %q: keep them the same", got, want)
	}
	for name, et := range entry {
		if name == "types" {
			continue
		}
		if ht := hook[name]; et != ht {
			t.Errorf("key %q: hookEntry has %s, Hook has %s", name, et, ht)
		}
	}
}

func TestKeysAt(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		path string
		want []string
	}{
		{name: "the top level", typ: reflect.TypeFor[*document](), want: []string{"hooks", "provenance", "settings"}},
		{
			name: "an entry", typ: reflect.TypeFor[*hookEntry](),
			want: []string{"bindings", "bindingsFile", "hostParams", "image", "labels", "name", "namespaces", "objectSelector", "params", "paramsFile", "policy", "policyFile", "resources", "strip", "types", "undo"},
		},
		{name: "a block of an entry", typ: reflect.TypeFor[*hookEntry](), path: "labels", want: []string{"annotations", "fromNamespace", "labels"}},
		{name: "an item of a list", typ: reflect.TypeFor[*hookEntry](), path: "objectSelector.matchExpressions[0]", want: []string{"key", "operator", "values"}},
		{name: "a string has no keys", typ: reflect.TypeFor[*hookEntry](), path: "name", want: nil},
		{name: "an unknown key has no keys", typ: reflect.TypeFor[*hookEntry](), path: "nope", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strictjson.KeysAt(tt.typ, tt.path); !slices.Equal(got, tt.want) {
				t.Errorf("KeysAt(%s, %q) = %q, want %q", tt.typ, tt.path, got, tt.want)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{name: "equal strings are 0 apart", a: "pod", b: "pod", want: 0},
		{name: "a swap of neighbours is one edit", a: "pdo", b: "pod", want: 1},
		{name: "a missing letter is one edit", a: "deploymnt", b: "deployment", want: 1},
		{name: "unrelated words are far apart", a: "pod", b: "service", want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := editDistance(tt.a, tt.b); got != tt.want {
				t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}
