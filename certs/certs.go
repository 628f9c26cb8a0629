package certs

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// File names inside Options.Dir. All files are PEM.
const (
	// CertFileName is the serving certificate, mode 0644 when written by this package.
	CertFileName = "tls.crt"
	// KeyFileName is the serving private key (PKCS #8), mode 0600 when written by this package.
	KeyFileName = "tls.key"
	// CAFileName is the CA certificate clients trust, mode 0644 when written by this package.
	CAFileName = "ca.crt"
	// CAKeyFileName is the CA private key (PKCS #8), mode 0600. Its absence next to tls.crt and
	// tls.key marks the directory as user-supplied.
	CAKeyFileName = "ca.key"
)

// Subject common names of generated certificates.
const (
	// LeafCommonName is the subject CommonName of generated serving certificates.
	LeafCommonName = "synchook"
	// caCommonNamePrefix, followed by "@" and the Unix time of issue, is the subject
	// CommonName of generated CAs; the suffix tells successive CAs apart.
	caCommonNamePrefix = "synchook-ca"
)

// File modes of written files.
const (
	dirMode     = 0o700
	certMode    = 0o644
	privKeyMode = 0o600
)

// Errors returned (wrapped, with the path or field concerned) by this package; test for them
// with errors.Is.
var (
	// ErrInvalidOptions is wrapped by New when Options are invalid.
	ErrInvalidOptions = errors.New("invalid options")
	// ErrInvalidPEM is wrapped when a file is not PEM or a certificate or key block in it does
	// not parse.
	ErrInvalidPEM = errors.New("invalid PEM data")
	// ErrNoCertificates is wrapped when a file holds no CERTIFICATE block.
	ErrNoCertificates = errors.New("no CERTIFICATE block")
	// ErrKeyMismatch is wrapped when a private key is not the one of its certificate.
	ErrKeyMismatch = errors.New("private key does not match certificate")
	// ErrNotValidNow is wrapped when a user-supplied certificate is expired or not yet valid.
	ErrNotValidNow = errors.New("certificate is not valid at this time")
)

// Authority keeps a CA and a serving certificate in one directory (see the package doc).
// Create it with New. Its methods are safe for concurrent use; Ensure calls are serialized.
type Authority struct {
	opts Options
	sans sans

	mu           sync.Mutex // serializes Ensure
	userSupplied atomic.Bool
}

// New returns an Authority for opts after applying defaults (see Options). It neither touches
// the file system nor generates keys; call Ensure for that. It fails with an error wrapping
// ErrInvalidOptions when Dir is empty or a field is out of range.
func New(opts Options) (*Authority, error) {
	opts.DNSNames = slices.Clone(opts.DNSNames)
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	opts.Dir = filepath.Clean(opts.Dir)
	return &Authority{opts: opts, sans: opts.wantedSANs()}, nil
}

// CertFile returns the path of the serving certificate, Dir/tls.crt.
func (a *Authority) CertFile() string { return filepath.Join(a.opts.Dir, CertFileName) }

// KeyFile returns the path of the serving private key, Dir/tls.key.
func (a *Authority) KeyFile() string { return filepath.Join(a.opts.Dir, KeyFileName) }

// CAFile returns the path of the CA certificate, Dir/ca.crt. In a user-supplied directory the
// file may be missing.
func (a *Authority) CAFile() string { return filepath.Join(a.opts.Dir, CAFileName) }

// caKeyFile returns the path of the CA private key, Dir/ca.key.
func (a *Authority) caKeyFile() string { return filepath.Join(a.opts.Dir, CAKeyFileName) }

// UserSupplied reports whether the last Ensure found user-supplied certificates (tls.crt and
// tls.key present, ca.key absent) and so left the directory alone. False before the first
// Ensure and when the last Ensure failed before it could tell.
func (a *Authority) UserSupplied() bool { return a.userSupplied.Load() }

// Ensure makes sure Dir holds a usable certificate set, at the time given by Options.Now.
//
// If tls.crt and tls.key exist and ca.key does not, the files are user-supplied: Ensure writes
// nothing and returns an error when they do not parse (wrapping ErrInvalidPEM or
// ErrNoCertificates), do not match (ErrKeyMismatch) or the certificate is not valid now
// (ErrNotValidNow). DNSNames, Validity and RenewAt do not apply to user-supplied files.
//
// Otherwise the directory is owned: Ensure creates it (mode 0700) if missing, keeps the CA
// while ca.crt and ca.key parse, match, are a CA valid now and RenewAt of the CA's lifetime
// has not passed, and otherwise issues a new CA and then a new serving certificate. It keeps
// the serving certificate while tls.crt and tls.key parse, match, the certificate is signed by
// the CA, is valid now, carries every wanted SAN and RenewAt of its lifetime has not passed,
// and otherwise issues a new one. Unusable files, including corrupted ones, are replaced, not
// reported. Writes are atomic, in the order ca.crt, ca.key, tls.key, tls.crt. Errors come from
// the file system (creating the directory, stat, write) or key generation.
func (a *Authority) Ensure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.opts.Now()

	user, err := a.detectUserSupplied()
	if err != nil {
		return err
	}
	a.userSupplied.Store(user)
	if user {
		return a.checkUserSupplied(now)
	}

	if err := os.MkdirAll(a.opts.Dir, dirMode); err != nil {
		return fmt.Errorf("certs: create %s: %w", a.opts.Dir, err)
	}

	ca, caKey, caReason := a.loadCA(now)
	var leafReason error
	if caReason != nil {
		if ca, caKey, err = a.issueCA(now); err != nil {
			return err
		}
		a.opts.Log.Info("issued new CA certificate", "reason", caReason.Error(), "file", a.CAFile(),
			"serial", ca.SerialNumber.Text(16), "notAfter", ca.NotAfter)
		leafReason = errors.New("a new CA was issued")
	} else {
		leafReason = a.checkLeaf(now, ca)
	}
	if leafReason == nil {
		return nil
	}
	leaf, err := a.issueLeaf(now, ca, caKey)
	if err != nil {
		return err
	}
	a.opts.Log.Info("issued new serving certificate", "reason", leafReason.Error(), "file", a.CertFile(),
		"serial", leaf.SerialNumber.Text(16), "notAfter", leaf.NotAfter,
		"dnsNames", leaf.DNSNames, "ipAddresses", leaf.IPAddresses)
	return nil
}

// Run calls Ensure at once and then every Options.CheckInterval until ctx is done, and then
// returns nil. A failed Ensure is logged at Error and retried at the next tick; issued
// certificates are logged at Info by Ensure. Run only rewrites files: a server using
// controller-runtime's certwatcher picks them up by itself. To run it under a controller-runtime
// manager, wrap it in manager.RunnableFunc.
func (a *Authority) Run(ctx context.Context) error {
	ticker := time.NewTicker(a.opts.CheckInterval)
	defer ticker.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if err := a.Ensure(); err != nil {
			a.opts.Log.Error(err, "certificate check failed", "dir", a.opts.Dir)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// detectUserSupplied reports whether tls.crt and tls.key exist while ca.key does not.
func (a *Authority) detectUserSupplied() (bool, error) {
	for _, p := range []struct {
		path string
		want bool
	}{{a.caKeyFile(), false}, {a.CertFile(), true}, {a.KeyFile(), true}} {
		ok, err := exists(p.path)
		if err != nil {
			return false, err
		}
		if ok != p.want {
			return false, nil
		}
	}
	return true, nil
}

// checkUserSupplied validates user-supplied tls.crt and tls.key without changing them.
func (a *Authority) checkUserSupplied(now time.Time) error {
	leaf, err := readCertificate(a.CertFile())
	if err != nil {
		return err
	}
	key, err := readPrivateKey(a.KeyFile())
	if err != nil {
		return err
	}
	if !keyMatches(key, leaf) {
		return fmt.Errorf("certs: user-supplied %s and %s: %w", a.CertFile(), a.KeyFile(), ErrKeyMismatch)
	}
	if !validAt(leaf, now) {
		return fmt.Errorf("certs: user-supplied %s: %w (valid from %s to %s, now %s)", a.CertFile(),
			ErrNotValidNow, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339),
			now.UTC().Format(time.RFC3339))
	}
	return nil
}

// loadCA returns the CA in ca.crt and ca.key, or a non-nil reason why it must be re-issued.
func (a *Authority) loadCA(now time.Time) (*x509.Certificate, crypto.Signer, error) {
	ca, err := readCertificate(a.CAFile())
	if err != nil {
		return nil, nil, err
	}
	key, err := readPrivateKey(a.caKeyFile())
	if err != nil {
		return nil, nil, err
	}
	switch {
	case !keyMatches(key, ca):
		return nil, nil, fmt.Errorf("%s and %s: %w", a.CAFile(), a.caKeyFile(), ErrKeyMismatch)
	case !ca.BasicConstraintsValid || !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, nil, fmt.Errorf("%s is not a CA certificate", a.CAFile())
	case !validAt(ca, now):
		return nil, nil, fmt.Errorf("%s is not valid now (from %s to %s)", a.CAFile(),
			ca.NotBefore.UTC().Format(time.RFC3339), ca.NotAfter.UTC().Format(time.RFC3339))
	case !now.Before(a.renewPoint(ca)):
		return nil, nil, fmt.Errorf("%s passed its renew point %s", a.CAFile(),
			a.renewPoint(ca).UTC().Format(time.RFC3339))
	}
	return ca, key, nil
}

// checkLeaf returns nil when tls.crt and tls.key can be kept with CA ca, or the reason why not.
func (a *Authority) checkLeaf(now time.Time, ca *x509.Certificate) error {
	leaf, err := readCertificate(a.CertFile())
	if err != nil {
		return err
	}
	key, err := readPrivateKey(a.KeyFile())
	if err != nil {
		return err
	}
	switch {
	case !keyMatches(key, leaf):
		return fmt.Errorf("%s and %s: %w", a.CertFile(), a.KeyFile(), ErrKeyMismatch)
	case leaf.CheckSignatureFrom(ca) != nil:
		return fmt.Errorf("%s is not signed by %s", a.CertFile(), a.CAFile())
	case !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth):
		return fmt.Errorf("%s lacks the server-auth extended key usage", a.CertFile())
	case !validAt(leaf, now):
		return fmt.Errorf("%s is not valid now (from %s to %s)", a.CertFile(),
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	case !now.Before(a.renewPoint(leaf)):
		return fmt.Errorf("%s passed its renew point %s", a.CertFile(),
			a.renewPoint(leaf).UTC().Format(time.RFC3339))
	}
	if missing := a.sans.missingFrom(leaf); len(missing) > 0 {
		return fmt.Errorf("%s lacks SANs %s", a.CertFile(), strings.Join(missing, ", "))
	}
	return nil
}

// renewPoint returns NotBefore + RenewAt × (NotAfter − NotBefore) of c.
func (a *Authority) renewPoint(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(life) * a.opts.RenewAt))
}

// validAt reports whether now lies within c's validity period (bounds included).
func validAt(c *x509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && !now.After(c.NotAfter)
}

// missingFrom returns the wanted SANs that c does not carry, as strings.
func (s sans) missingFrom(c *x509.Certificate) []string {
	var missing []string
	for _, name := range s.dns {
		if !slices.ContainsFunc(c.DNSNames, func(have string) bool { return strings.EqualFold(have, name) }) {
			missing = append(missing, name)
		}
	}
	for _, ip := range s.ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			missing = append(missing, ip.String())
		}
	}
	return missing
}

// issueCA generates a new self-signed CA valid from now and writes ca.crt, then ca.key.
func (a *Authority) issueCA(now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", caCommonNamePrefix, now.Unix())},
		NotBefore:             now.Add(-backdate(a.opts.CAValidity)),
		NotAfter:              now.Add(a.opts.CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	ca, err := a.createAndWrite(tmpl, tmpl, key, key, a.CAFile(), a.caKeyFile(), true)
	if err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

// issueLeaf generates a new serving certificate signed by ca and writes tls.key, then tls.crt.
// Its NotAfter is cut to the CA's.
func (a *Authority) issueLeaf(now time.Time, ca *x509.Certificate, caKey crypto.Signer) (*x509.Certificate, error) {
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: LeafCommonName},
		DNSNames:              slices.Clone(a.sans.dns),
		IPAddresses:           slices.Clone(a.sans.ips),
		NotBefore:             now.Add(-backdate(a.opts.Validity)),
		NotAfter:              now.Add(a.opts.Validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	return a.createAndWrite(tmpl, ca, key, caKey, a.CertFile(), a.KeyFile(), false)
}

// createAndWrite signs tmpl (public key of key) with parent/parentKey and writes the
// certificate to certPath and key to keyPath: certificate first when certFirst, else key first.
func (a *Authority) createAndWrite(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer,
	certPath, keyPath string, certFirst bool,
) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("certs: create certificate for %s: %w", certPath, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse new certificate for %s: %w", certPath, err)
	}
	certPEM, err := certutil.EncodeCertificates(cert)
	if err != nil {
		return nil, fmt.Errorf("certs: encode certificate for %s: %w", certPath, err)
	}
	keyPEM, err := encodePrivateKey(key)
	if err != nil {
		return nil, err
	}
	writeCert := func() error { return writeFileAtomic(certPath, certPEM, certMode) }
	writeKey := func() error { return writeFileAtomic(keyPath, keyPEM, privKeyMode) }
	order := []func() error{writeKey, writeCert}
	if certFirst {
		order = []func() error{writeCert, writeKey}
	}
	for _, write := range order {
		if err := write(); err != nil {
			return nil, err
		}
	}
	syncDir(a.opts.Dir)
	return cert, nil
}

// serialLimit is 2^128: serials are random in [1, 2^128).
var serialLimit = new(big.Int).Lsh(big.NewInt(1), 128)

// newKeyAndSerial returns a new ECDSA P-256 key and a random positive 128-bit serial number.
func newKeyAndSerial() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: generate key: %w", err)
	}
	for {
		serial, err := rand.Int(rand.Reader, serialLimit)
		if err != nil {
			return nil, nil, fmt.Errorf("certs: generate serial: %w", err)
		}
		if serial.Sign() > 0 {
			return key, serial, nil
		}
	}
}
