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
)

// PEM block types written by this package.
const (
	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY" // PKCS #8
)

// LoadCertPool reads the PEM file caFile (typically Authority.CAFile()) and returns a pool
// holding every CERTIFICATE block in it, for a client's tls.Config.RootCAs. Errors: reading
// the file fails (wraps the fs error, e.g. fs.ErrNotExist); a CERTIFICATE block does not parse
// (wraps ErrInvalidPEM); the file holds no CERTIFICATE block (wraps ErrNoCertificates).
func LoadCertPool(caFile string) (*x509.CertPool, error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", caFile, err)
	}
	certs, err := parseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// parseCertificates returns every CERTIFICATE block of data, in order. Other block types are
// skipped. It fails when a CERTIFICATE block does not parse or none is present.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidPEM, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, ErrNoCertificates
	}
	return out, nil
}

// readCertificate reads path and returns its first certificate.
func readCertificate(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", path, err)
	}
	certs, err := parseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w", path, err)
	}
	return certs[0], nil
}

// readPrivateKey reads path and returns the first private key in it, which may be PKCS #8
// ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY").
func readPrivateKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", path, err)
	}
	key, err := parsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w", path, err)
	}
	return key, nil
}

// parsePrivateKey returns the first private key block of data as a crypto.Signer. Its errors
// never contain key bytes.
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%w: no private key block", ErrInvalidPEM)
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case pemPrivateKey:
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s block does not parse", ErrInvalidPEM, block.Type)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%w: %T is not a signing key", ErrInvalidPEM, key)
		}
		return signer, nil
	}
}

// keyMatches reports whether key is the private half of cert's public key.
func keyMatches(key crypto.Signer, cert *x509.Certificate) bool {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(cert.PublicKey)
}

// encodeCertificate returns der as a PEM CERTIFICATE block.
func encodeCertificate(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der})
}

// encodePrivateKey returns key as a PEM PKCS #8 PRIVATE KEY block.
func encodePrivateKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// exists reports whether path exists (following symlinks, as Kubernetes Secret volumes use
// them). Errors other than "does not exist" are returned.
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
	cert, err := readCertificate(certFile)
	if err != nil {
		return time.Time{}, err
	}
	return cert.NotAfter, nil
}
