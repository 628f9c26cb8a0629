package hookclient_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hookclient"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

func TestMutateOverTheUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "synchook.sock")
	reg := engine.NewRegistry(nil)
	reg.MustRegister(hooks.NewFunc("label", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, labelFn("via", "unix")))
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{SocketPath: sock, DisableTCP: true, ProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() { cancel(); <-done }()

	c, err := hookclient.New(hookclient.Options{SocketPath: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pod := fixtures.Pod("ns", "web")
	// The socket appears when Start has got that far: until then the client cannot connect.
	// A minute: the server's start on a loaded machine, not a measure of anything.
	testenv.Eventually(t, time.Minute, "a Mutate over the socket", func() error {
		return c.Mutate(t.Context(), hooks.CreatePhysical, pod)
	})
	if pod.Labels["via"] != "unix" {
		t.Errorf("labels %v", pod.Labels)
	}
}
