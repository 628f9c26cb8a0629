package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

// TestCertificateRotationUnderLoadDropsNoRequest renews the serving certificate every ~second
// while 8 clients send AdmissionReviews (half of them on a new connection each time), and
// asserts that every request succeeds and that the served certificate really changed.
func TestCertificateRotationUnderLoadDropsNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	dir := t.TempDir()
	ca, err := certs.New(certs.Options{Dir: dir, Validity: 2 * time.Second, RenewAt: 0.5, CheckInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Ensure(); err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry(nil)
	reg.MustRegister(testHook("labels", addLabel))
	port := testenv.FreePort(t)
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{
		BindAddress: fmt.Sprintf("127.0.0.1:%d", port), ProbeBindAddress: "0", CertFile: ca.CertFile(), KeyFile: ca.KeyFile(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); _ = s.Start(ctx) }()
	go func() { defer bg.Done(); _ = ca.Run(ctx) }()
	defer func() { cancel(); bg.Wait() }()

	pool, err := certs.LoadCertPool(ca.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://localhost:%d/mutate/CreatePhysical", port)
	waitHTTPS(t, fmt.Sprintf("https://localhost:%d/readyz", port))

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	serials := sync.Map{}
	stop := time.Now().Add(4 * time.Second)
	var load sync.WaitGroup
	for w := range 8 {
		load.Add(1)
		go func() {
			defer load.Done()
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: w%2 == 0}
			hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			for time.Now().Before(stop) {
				resp, err := hc.Post(url, "application/json", bytes.NewReader([]byte(podReview)))
				if err == nil {
					_, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
					serials.Store(resp.TLS.PeerCertificates[0].SerialNumber.String(), true)
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	load.Wait()
	n := 0
	serials.Range(func(_, _ any) bool { n++; return true })
	t.Logf("requests ok=%d failed=%d, serving certificates seen=%d", ok.Load(), failed.Load(), n)
	if failed.Load() != 0 {
		t.Errorf("%d requests failed during rotation, first: %v", failed.Load(), firstErr.Load())
	}
	if n < 2 {
		t.Errorf("the certificate never rotated (saw %d)", n)
	}
	if _, err := os.Stat(ca.CertFile()); err != nil {
		t.Fatal(err)
	}
}

func waitHTTPS(t *testing.T, url string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // readiness poll only
	testenv.Eventually(t, 30*time.Second, url, func() error {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}
