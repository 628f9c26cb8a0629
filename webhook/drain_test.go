package webhook_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

// TestShutdownFinishesInFlightRequests stops the server (what SIGTERM does in main) while a
// request is inside a slow hook: the request must still get its patch, and Start must return nil.
func TestShutdownFinishesInFlightRequests(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.New(certs.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Ensure(); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	reg := engine.NewRegistry(nil)
	reg.MustRegister(testHook("slow", func(ctx context.Context, o client.Object) (client.Object, error) {
		close(entered)
		<-release // until the server is shutting down
		return addLabel(ctx, o)
	}))
	port := testenv.FreePort(t)
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{BindAddress: fmt.Sprintf("127.0.0.1:%d", port), ProbeBindAddress: "0", CertFile: ca.CertFile(), KeyFile: ca.KeyFile()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- s.Start(ctx) }()
	pool, _ := certs.LoadCertPool(ca.CAFile())
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitHTTPS(t, fmt.Sprintf("https://localhost:%d/healthz", port))

	type answer struct {
		body []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := hc.Post(fmt.Sprintf("https://localhost:%d/mutate/CreatePhysical", port), "application/json", strings.NewReader(podReview))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{b, err}
	}()
	<-entered
	stop() // shut down while the hook runs
	// The server closes its listener first when it shuts down: once it refuses connections,
	// the hook may finish.
	testenv.Eventually(t, 30*time.Second, "the listener closed by the shutdown", func() error {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return nil
		}
		c.Close()
		return errors.New("still accepting connections")
	})
	close(release)
	a := <-got
	if a.err != nil {
		t.Fatalf("in-flight request failed during shutdown: %v", a.err)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(a.body, &review); err != nil || review.Response == nil || review.Response.Patch == nil {
		t.Fatalf("in-flight request got %s (%v)", a.body, err)
	}
	if err := <-served; err != nil {
		t.Errorf("Start returned %v after shutdown", err)
	}
}
