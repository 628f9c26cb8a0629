package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
)

func TestHooksFindALoggerNamingTheHookItsTypeAndTheGVKInTheirContext(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{})
	typed := func(ctx context.Context, o client.Object) (client.Object, error) {
		logr.FromContextOrDiscard(ctx).Info("typed hook ran")
		return o, nil
	}
	meta := func(ctx context.Context, _ *hooks.Metadata) error {
		logr.FromContextOrDiscard(ctx).Info("metadata hook ran")
		return nil
	}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(
		hooks.NewFunc("typed-hook", &corev1.Pod{}, []hooks.HookType{hooks.UpdatePhysical}, typed),
		hooks.NewMetadataFunc("meta-hook", &corev1.Service{}, []hooks.HookType{hooks.CreateVirtual}, func(ctx context.Context, o client.Object) (client.Object, error) { return o, meta(ctx, nil) }, meta),
	)
	r := engine.NewRunner(reg, engine.RunnerOptions{Log: log})
	if _, err := r.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Pod"), hooks.UpdatePhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Service"), hooks.CreateVirtual, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}`)); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"typed hook ran", `"hook"="typed-hook"`, `"hookType"="UpdatePhysical"`, `"gvk"="/v1, Kind=Pod"`},
		{"metadata hook ran", `"hook"="meta-hook"`, `"hookType"="CreateVirtual"`, `"gvk"="/v1, Kind=Service"`},
	}
	if len(lines) != len(want) {
		t.Fatalf("log lines %q, want one per hook", lines)
	}
	for i, w := range want {
		for _, part := range w {
			if !strings.Contains(lines[i], part) {
				t.Errorf("line %q lacks %s", lines[i], part)
			}
		}
	}
}
