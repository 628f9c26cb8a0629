package hookclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/synchook/synchook/certs"
)

// maxResponseBytes bounds what is read of a response body (64 MiB).
const maxResponseBytes = 64 << 20

// tlsState is one generation of the CA: the HTTP client that trusts it and what it was loaded
// from. It is replaced, never changed, except for checked.
type tlsState struct {
	client    *http.Client
	transport *http.Transport
	caPEM     []byte
	checked   atomic.Int64 // when the CA file was last read, Unix nanoseconds
}

// sinceChecked returns the time since the CA file was last read.
func (st *tlsState) sinceChecked(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, st.checked.Load()))
}

// newTransport returns an HTTP/1.1-only keep-alive transport that trusts pool and ignores
// proxy settings (the sidecar is local).
func newTransport(pool *x509.CertPool, maxIdle int) *http.Transport {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 5 * time.Second,
		ForceAttemptHTTP2:   false,
		Protocols:           protocols,
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: maxIdle,
		IdleConnTimeout:     90 * time.Second,
		// A whole AdmissionReview in one write (one TLS record, one syscall) instead of 4 KiB
		// pieces: a 5 KiB Pod otherwise takes two of each.
		WriteBufferSize: 64 << 10,
	}
}

// httpClient returns the HTTP client for the current CA, reading the CA file again first when
// it was last read CAReloadInterval ago or more.
func (c *Client) httpClient() (*http.Client, error) {
	if c.unix != nil {
		return c.unix, nil
	}
	st := c.tls.Load()
	if st != nil && st.sinceChecked(c.opts.Clock.Now()) < c.opts.CAReloadInterval {
		return st.client, nil
	}
	if _, err := c.reloadCA(false); err != nil && c.tls.Load() == nil {
		return nil, err
	}
	return c.tls.Load().client, nil
}

// reloadCA reads the CA file and, when its content changed, installs a new transport that
// trusts it and closes the idle connections of the old one (connections in use finish their
// request). Unless force, it does nothing when the file was read less than CAReloadInterval
// ago. It reports whether a new CA was installed. When the file cannot be read or parsed, the
// current CA (if any) stays in use and the error is returned.
func (c *Client) reloadCA(force bool) (bool, error) {
	c.tlsMu.Lock()
	defer c.tlsMu.Unlock()
	old := c.tls.Load()
	now := c.opts.Clock.Now()
	if old != nil && !force && old.sinceChecked(now) < c.opts.CAReloadInterval {
		return false, nil
	}
	// Read the bytes before parsing: if the file changes in between, the next check sees
	// bytes that differ from these and loads it again.
	caPEM, err := os.ReadFile(c.opts.CAFile)
	if err == nil && old != nil && bytes.Equal(caPEM, old.caPEM) {
		old.checked.Store(now.UnixNano())
		return false, nil
	}
	var pool *x509.CertPool
	if err == nil {
		pool, err = certs.LoadCertPool(c.opts.CAFile)
	}
	if err != nil {
		if old != nil {
			old.checked.Store(now.UnixNano())
			c.opts.Log.Error(err, "cannot reload the sidecar CA; keeping the current one", "file", c.opts.CAFile)
		}
		return false, fmt.Errorf("load sidecar CA: %w", err)
	}
	tr := newTransport(pool, c.opts.MaxIdleConnsPerHost)
	st := &tlsState{client: &http.Client{Transport: tr}, transport: tr, caPEM: caPEM}
	st.checked.Store(now.UnixNano())
	c.tls.Store(st)
	if old != nil {
		old.transport.CloseIdleConnections()
		c.opts.Log.Info("loaded a new sidecar CA", "file", c.opts.CAFile)
	}
	return true, nil
}

// notSent reports whether err says the request never left this process: the connection to
// the sidecar could not be opened.
func notSent(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// untrusted reports whether err is a TLS handshake failure because the server's certificate
// did not verify; no request bytes were sent on that connection.
func untrusted(err error) bool {
	var verifyErr *tls.CertificateVerificationError
	return errors.As(err, &verifyErr)
}

// send sends one request and returns the status and body of the response. It retries, with
// backoff, while the connection cannot be opened (up to Retries times), and once after
// re-reading the CA file when the server's certificate did not verify and the file changed.
// Other errors are returned at once: the request may have reached the sidecar.
func (c *Client) send(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	backoff := c.opts.RetryBackoff
	retries, reloaded := 0, false
	for {
		hc, err := c.httpClient()
		if err != nil {
			return 0, nil, err
		}
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return 0, nil, fmt.Errorf("build request: %w", err)
		}
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err == nil {
			defer resp.Body.Close()
			data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
			if err != nil {
				return resp.StatusCode, nil, fmt.Errorf("read response: %w", err)
			}
			return resp.StatusCode, data, nil
		}
		switch {
		case untrusted(err) && !reloaded:
			reloaded = true
			if changed, _ := c.reloadCA(true); changed {
				c.opts.Log.V(1).Info("retrying with the reloaded CA", "url", url)
				continue
			}
		case notSent(err) && retries < c.opts.Retries && ctx.Err() == nil:
			retries++
			c.opts.Log.V(1).Info("sidecar not reachable, retrying", "url", url, "retry", retries, "backoff", backoff.String(), "error", err.Error())
			if waitErr := c.sleep(ctx, backoff); waitErr != nil {
				return 0, nil, fmt.Errorf("%w (then %w while waiting to retry)", err, waitErr)
			}
			backoff *= 2
			continue
		}
		return 0, nil, err
	}
}

// sleep waits d on the client's clock or until ctx ends, whichever is first, and returns
// ctx.Err() in the latter case.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	t := c.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
