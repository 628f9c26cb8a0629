package config_test

import (
	"errors"
	"testing"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/internal/engine"
)

// FuzzParse feeds arbitrary YAML to config.Parse: it must never panic, every error must wrap
// config.ErrInvalid, and a config that parses must build into a registry.
func FuzzParse(f *testing.F) {
	f.Add([]byte("hooks:\n  - resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}\n"))
	f.Add([]byte("hooks:\n  - name: s\n    resources: [{apiVersion: example.com/v1, kind: Widget}]\n    types: [GetPhysical]\n    strip: {paths: [\"/a~1b\", \"/spec/x/0\"]}\n    namespaces: [a]\n    objectSelector: {matchExpressions: [{key: k, operator: In, values: [v]}]}\n"))
	f.Add([]byte("hooks: [{labls: {}}]"))
	f.Add([]byte("{"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data)
		if err != nil {
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := cfg.Build(engine.NewRegistry(nil)); err != nil {
			t.Fatalf("a config that parsed does not build: %v", err)
		}
	})
}
