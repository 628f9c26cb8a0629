package webhook_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

func TestUnixSocketServesPlainHTTPWithMode0600(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "synchook.sock")
	os.WriteFile(sock, nil, 0o600) // a regular file in the way is refused, not removed
	reg := engine.NewRegistry(nil)
	reg.MustRegister(testHook("labels", addLabel))
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{SocketPath: sock, DisableTCP: true, ProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Start over a regular file: %v", err)
	}
	os.Remove(sock)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var resp *http.Response
	// The socket appears when Start has got that far: until then the client cannot connect.
	testenv.Eventually(t, 10*time.Second, "a POST over the socket", func() error {
		resp, err = hc.Post("http://synchook/mutate/CreatePhysical", "application/json", strings.NewReader(podReview))
		return err
	})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"patchType":"JSONPatch"`) {
		t.Errorf("response %s", body)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}
