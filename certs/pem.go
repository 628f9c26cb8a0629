package certs

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// errNoCertsText is the text of the error certutil.ParseCertsPEM returns for data without a
// CERTIFICATE block. client-go has no sentinel for it, so it is taken from the library itself
// (not copied) to tell that case (ErrNoCertificates) from a block that does not parse
// (ErrInvalidPEM).
var errNoCertsText = func() string {
	_, err := certutil.ParseCertsPEM(nil)
	if err == nil {
		return ""
	}
	return err.Error()
}()

// certsError maps an error of certutil.ParseCertsPEM or certutil.NewPoolFromBytes to one wrapping
// ErrNoCertificates or ErrInvalidPEM.
func certsError(err error) error {
	if err.Error() == errNoCertsText {
		return ErrNoCertificates
	}
	return fmt.Errorf("%w: %w", ErrInvalidPEM, err)
}

// LoadCertPool reads the PEM file caFile (typically Authority.CAFile()) and returns a pool
// holding every CERTIFICATE block in it, for a client's tls.Config.RootCAs. Errors: reading
// the file fails (wraps the fs error, e.g. fs.ErrNotExist); a CERTIFICATE block does not parse
// (wraps ErrInvalidPEM); the file holds no CERTIFICATE block (wraps ErrNoCertificates).
//
// It reads the file itself and builds the pool with certutil.NewPoolFromBytes rather than calling
// certutil.NewPool, whose errors drop the error chain (%s) and so the kinds above.
func LoadCertPool(caFile string) (*x509.CertPool, error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", caFile, err)
	}
	pool, err := certutil.NewPoolFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w", caFile, certsError(err))
	}
	return pool, nil
}

// readCertificate reads path and returns its first certificate (certutil.ParseCertsPEM: blocks
// other than CERTIFICATE, and CERTIFICATE blocks with PEM headers, are skipped).
func readCertificate(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", path, err)
	}
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w", path, certsError(err))
	}
	return certs[0], nil
}

// readPrivateKey reads path and returns the first private key in it that parses, which may be
// PKCS #8 ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY"), as
// keyutil.ParsePrivateKeyPEM accepts. Its errors never contain key bytes.
func readPrivateKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", path, err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w: %w", path, ErrInvalidPEM, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("certs: parse %s: %w: %T is not a signing key", path, ErrInvalidPEM, key)
	}
	return signer, nil
}

// keyMatches reports whether key is the private half of cert's public key.
func keyMatches(key crypto.Signer, c *x509.Certificate) bool {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(c.PublicKey)
}

// encodePrivateKey returns key as a PEM PKCS #8 PRIVATE KEY block. keyutil.MarshalPrivateKeyToPEM
// is not used: it writes ECDSA keys as SEC 1 "EC PRIVATE KEY", while tls.key and ca.key are
// documented (and have always been written) as PKCS #8.
func encodePrivateKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: keyutil.PrivateKeyBlockType, Bytes: der}), nil
}

// exists reports whether path exists (following symlinks, as Kubernetes Secret volumes use
// them). Errors other than "does not exist" are returned. certutil.CanReadCertAndKey is not used
// for detecting user-supplied files: it takes an existing but unreadable file for a missing
// one (so Ensure would overwrite it) and fails on a lone tls.crt or tls.key, which Ensure
// replaces.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("certs: stat %s: %w", path, err)
	}
}

// writeFileAtomic replaces path with data and the given mode: it writes a temporary file in
// the same directory, syncs it and renames it over path, so readers see the old or the new
// content, never a mix. The temporary file is removed on failure.
//
// certutil.WriteCert and keyutil.WriteKey are not used: they call os.WriteFile on the target
// itself (truncate, then write in place), so a reader such as controller-runtime's certwatcher
// can see an empty or half-written file, and an existing file keeps its old mode. They also
// create missing parents with mode 0755 where Ensure wants 0700.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, "."+strings.TrimPrefix(base, ".")+".tmp-*")
	if err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(mode); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	return nil
}

// syncDir flushes the directory entry changes of dir (the renames) to disk. Best effort:
// some filesystems do not support syncing a directory.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}

// NotAfter returns the expiry time of the first certificate in the PEM file certFile (e.g. a
// serving cert, generated or user-supplied). Errors wrap ErrInvalidPEM or ErrNoCertificates, or
// the read error.
func NotAfter(certFile string) (time.Time, error) {
	c, err := readCertificate(certFile)
	if err != nil {
		return time.Time{}, err
	}
	return c.NotAfter, nil
}
