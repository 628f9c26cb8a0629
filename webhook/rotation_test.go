package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

// TestCertificateRotationUnderLoadDropsNoRequest rotates the serving certificate several times
// while 8 clients send AdmissionReviews without pause (half of them on a new connection, so a
// new handshake and certificate check, each time; half on kept-alive connections that must
// survive the rotation), and asserts that every request succeeds and that each new certificate
// was served.
//
// Time is a fake clock shared by the Authority (what it issues and when it renews) and the
// clients' certificate checks (tls.Config.Time): each round moves it a third of the serving
// certificate's lifetime on and calls Ensure, so the certificate is renewed every second round
// and would expire, failing the fresh handshakes, in the fourth round without renewal. The
// server reloads tls.crt by itself (certwatcher); the test waits until the clients have been
// answered with the certificate in tls.crt, on a new connection, at the new time.
func TestCertificateRotationUnderLoadDropsNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	const (
		validity = time.Hour
		step     = validity / 3
		rounds   = 8
		// handshakes is how many requests on new connections must be answered with the
		// certificate in tls.crt after a round's Ensure before the clock moves on.
		handshakes = 8
	)
	clk := clocktesting.NewFakePassiveClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	ca, err := certs.New(certs.Options{Dir: t.TempDir(), Validity: validity, RenewAt: 0.5, Now: clk.Now})
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
	served := make(chan error, 1)
	go func() { served <- s.Start(ctx) }()
	defer func() { cancel(); <-served }()

	pool, err := certs.LoadCertPool(ca.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://localhost:%d/mutate/CreatePhysical", port)
	waitHTTPS(t, fmt.Sprintf("https://localhost:%d/readyz", port))

	load := newRotationLoad()
	stop := make(chan struct{})
	var clients sync.WaitGroup
	stopLoad := sync.OnceFunc(func() { close(stop); clients.Wait() })
	defer stopLoad() // before the server stops, also when the test fails early
	for w := range 8 {
		fresh := w%2 == 0
		clients.Add(1)
		go func() {
			defer clients.Done()
			tr := &http.Transport{
				TLSClientConfig:   &tls.Config{RootCAs: pool, Time: clk.Now, MinVersion: tls.VersionTLS12},
				DisableKeepAlives: fresh,
			}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			for {
				select {
				case <-stop:
					return
				default:
				}
				serial, err := postReview(ctx, hc, url)
				load.record(fresh, serial, err)
			}
		}()
	}

	rotations := 0
	last := servingSerial(t, ca)
	for r := range rounds {
		clk.SetTime(clk.Now().Add(step))
		if err := ca.Ensure(); err != nil {
			t.Fatalf("round %d: Ensure: %v", r+1, err)
		}
		want := servingSerial(t, ca)
		if want != last {
			rotations++
			last = want
		}
		base := load.handshakesWith(want)
		waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
		err := load.wait(waitCtx, func() bool { return load.handshakes[want] >= base+handshakes })
		waitCancel()
		if err != nil {
			t.Errorf("round %d (clock %s): %d new connections answered with the certificate in tls.crt (serial %s): %v",
				r+1, clk.Now().Format(time.RFC3339), load.handshakesWith(want)-base, want, err)
			break
		}
	}
	stopLoad()

	ok, failed, seen, firstErr := load.result()
	t.Logf("requests ok=%d failed=%d, rotations=%d, serving certificates seen=%d", ok, failed, rotations, seen)
	if failed != 0 {
		t.Errorf("%d requests failed during rotation, first: %v", failed, firstErr)
	}
	if rotations < rounds/2 {
		t.Errorf("the certificate rotated %d times in %d rounds, want %d", rotations, rounds, rounds/2)
	}
	if seen != rotations+1 {
		t.Errorf("%d certificates served, want the %d issued", seen, rotations+1)
	}
	if _, err := os.Stat(ca.CertFile()); err != nil {
		t.Fatal(err)
	}
}

// postReview sends one AdmissionReview and returns the serial of the certificate the server
// presented, or an error for a failed request or a status other than 200.
func postReview(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(podReview)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.String(), nil
}

// rotationLoad is what the clients of TestCertificateRotationUnderLoadDropsNoRequest have seen.
// The test waits on it (wait) rather than for a time.
type rotationLoad struct {
	mu         sync.Mutex
	ok, failed int
	firstErr   error
	served     map[string]bool // serials of the certificates that answered a request
	handshakes map[string]int  // serial → requests on a new connection it answered
	changed    chan struct{}   // closed and replaced on every request
}

func newRotationLoad() *rotationLoad {
	return &rotationLoad{served: map[string]bool{}, handshakes: map[string]int{}, changed: make(chan struct{})}
}

// record counts one request: on a new connection when fresh, answered by the certificate with
// serial, or failed with err.
func (l *rotationLoad) record(fresh bool, serial string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed++
		if l.firstErr == nil {
			l.firstErr = err
		}
	} else {
		l.ok++
		l.served[serial] = true
		if fresh {
			l.handshakes[serial]++
		}
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait blocks until cond, called with l locked, holds; it fails as soon as a request has failed
// or when ctx ends.
func (l *rotationLoad) wait(ctx context.Context, cond func() bool) error {
	for {
		l.mu.Lock()
		failed, firstErr, done, changed := l.failed, l.firstErr, cond(), l.changed
		l.mu.Unlock()
		switch {
		case failed > 0:
			return fmt.Errorf("%d requests failed, first: %w", failed, firstErr)
		case done:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// handshakesWith returns how many requests on a new connection serial has answered.
func (l *rotationLoad) handshakesWith(serial string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handshakes[serial]
}

// result returns the counts of succeeded and failed requests, how many certificates were
// served and the first failure.
func (l *rotationLoad) result() (ok, failed, served int, firstErr error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok, l.failed, len(l.served), l.firstErr
}

// servingSerial returns the serial of the certificate in the Authority's tls.crt.
func servingSerial(t *testing.T, ca *certs.Authority) string {
	t.Helper()
	b, err := os.ReadFile(ca.CertFile())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", ca.CertFile())
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
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
