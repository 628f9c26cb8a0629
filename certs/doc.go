// Package certs gives the synchook HTTPS server a certificate when nobody else does.
//
// An Authority owns one directory holding four PEM files:
//
//	ca.crt   the CA certificate clients trust (mode 0644)
//	ca.key   the CA private key (mode 0600)
//	tls.crt  the serving (leaf) certificate (mode 0644)
//	tls.key  the serving private key (mode 0600)
//
// Authority.Ensure makes that directory hold a usable set: it creates a self-signed ECDSA P-256
// CA and a leaf signed by it for localhost, 127.0.0.1, ::1 and any extra names from Options,
// reuses them while they are valid, and re-issues the leaf (or the CA and then the leaf) once
// RenewAt of their lifetime has passed, as cert-manager does. Authority.Run calls Ensure on a
// timer. Files are replaced atomically (temporary file in the same directory, then rename), so
// a reader sees either the old or the new file, never half of one.
//
// When tls.crt and tls.key exist but ca.key does not, the files are taken to be supplied by the
// user (for example a cert-manager Secret mounted at the directory): Ensure then only checks
// that they parse, match and are valid now, and never writes anything.
//
// This package does not serve TLS or reload certificates into a server: controller-runtime's
// certwatcher, used by its webhook server, re-reads tls.crt and tls.key itself. It does not
// renew user-supplied certificates, patch caBundle fields of webhook configurations, or keep
// the old CA in ca.crt during a CA rotation; clients that copied ca.crt once must re-read it
// after the CA is rotated (by default after about 6.7 years). Each process that owns a
// directory has its own CA, so replicas that should share a CA must share the directory or be
// given user-supplied certificates.
package certs
