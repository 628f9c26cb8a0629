package webhook_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

// clientCA writes a CA to dir/client-ca.crt and returns a client certificate it signed.
func clientCA(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "syncer-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	os.WriteFile(filepath.Join(dir, "client-ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "syncer"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestTLSRequiresModernVersionsAndAClientCertificateWhenConfigured(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.New(certs.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Ensure(); err != nil {
		t.Fatal(err)
	}
	clientCert := clientCA(t, dir)
	reg := engine.NewRegistry(nil)
	reg.MustRegister(testHook("labels", addLabel))
	port := testenv.FreePort(t)
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{
		BindAddress: fmt.Sprintf("127.0.0.1:%d", port), ProbeBindAddress: "0",
		CertFile: ca.CertFile(), KeyFile: ca.KeyFile(), ClientCAFile: filepath.Join(dir, "client-ca.crt"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() { cancel(); <-done }()

	pool, err := certs.LoadCertPool(ca.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://localhost:%d/healthz", port)
	get := func(cfg *tls.Config) error {
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	authed := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}
	testenv.Eventually(t, 30*time.Second, "an authenticated client getting through", func() error { return get(authed) })
	if err := get(&tls.Config{RootCAs: pool}); err == nil {
		t.Error("a client without a certificate was accepted")
	}
	if err := get(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 client was accepted")
	}
}
