package config

import (
	"maps"
	"reflect"
	"slices"
	"testing"
)

func TestFileHookMatchesHook(t *testing.T) {
	file, hook := jsonFields(reflect.TypeFor[fileHook]()), jsonFields(reflect.TypeFor[Hook]())
	if got, want := slices.Sorted(maps.Keys(file)), slices.Sorted(maps.Keys(hook)); !slices.Equal(got, want) {
		t.Fatalf("fileHook keys %q, Hook keys %q: keep them the same", got, want)
	}
	for name, ft := range file {
		if name == "types" {
			continue
		}
		if ht := hook[name]; ft != ht {
			t.Errorf("key %q: fileHook has %s, Hook has %s", name, ft, ht)
		}
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
