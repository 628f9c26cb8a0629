package certs

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Default values that setDefaults applies to zero fields of Options.
const (
	// DefaultCAValidity is the lifetime of a generated CA certificate: 10 years (3650 days).
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// DefaultValidity is the lifetime of a generated serving certificate: 1 year (365 days).
	DefaultValidity = 365 * 24 * time.Hour
	// DefaultRenewAt is the fraction of a certificate's lifetime after which it is renewed:
	// 2/3, cert-manager's rule.
	DefaultRenewAt = 2.0 / 3
	// DefaultCheckInterval is how often Run calls Ensure: 1 minute.
	DefaultCheckInterval = time.Minute
)

// Bounds on Options.RenewAt. Below minRenewAt the backdating of NotBefore (see maxBackdate)
// could put the renew point before the moment of issue, so every check would re-issue.
const (
	minRenewAt = 0.05
	maxRenewAt = 1.0
)

// maxBackdate is the largest amount NotBefore is set before the moment of issue, to tolerate
// clock skew between this process and its clients. The actual backdate is the smaller of this
// and a twentieth of the certificate's validity.
const maxBackdate = 5 * time.Minute

// Always-present subject alternative names of the serving certificate.
var (
	defaultDNSNames = []string{"localhost"}
	defaultIPs      = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
)

// Options configures an Authority. Zero fields take the defaults documented on each field;
// negative durations and out-of-range fractions make New fail with ErrInvalidOptions.
type Options struct {
	// Dir is the directory that holds ca.crt, ca.key, tls.crt and tls.key. Required. Ensure
	// creates it with mode 0700 when it is missing (parents included).
	Dir string

	// DNSNames are extra subject alternative names for the serving certificate, on top of the
	// always-present localhost, 127.0.0.1 and ::1. An entry that parses as an IP address
	// (net.ParseIP) becomes an IP SAN, any other non-empty entry a DNS SAN (compared
	// case-insensitively). Empty entries and duplicates are ignored. Default: none.
	DNSNames []string

	// CAValidity is the lifetime of a generated CA certificate. Default DefaultCAValidity
	// (10 years).
	CAValidity time.Duration

	// Validity is the lifetime of a generated serving certificate. It never outlives the CA
	// that signs it: its NotAfter is cut to the CA's NotAfter. Default DefaultValidity (1 year).
	Validity time.Duration

	// RenewAt is the fraction of a certificate's lifetime (NotAfter - NotBefore) after which
	// Ensure replaces it, for the serving certificate and the CA alike; a new CA always
	// brings a new serving certificate. Must be in [0.05, 1). Default DefaultRenewAt (2/3).
	RenewAt float64

	// CheckInterval is how often Run calls Ensure. It should be well below
	// (1 - RenewAt) * Validity so a certificate is renewed before it expires. Default
	// DefaultCheckInterval (1 minute).
	CheckInterval time.Duration

	// Now returns the current time; tests replace it with a fake clock. Default time.Now.
	Now func() time.Time

	// Log receives one Info line per issued certificate (never key material) and, from Run,
	// the errors of failed checks. Default logr.Discard().
	Log logr.Logger
}

// setDefaults fills zero fields with their defaults and rejects invalid values with an error
// wrapping ErrInvalidOptions.
func (o *Options) setDefaults() error {
	if strings.TrimSpace(o.Dir) == "" {
		return fmt.Errorf("certs: %w: Dir is required", ErrInvalidOptions)
	}
	o.CAValidity = cmp.Or(o.CAValidity, DefaultCAValidity)
	o.Validity = cmp.Or(o.Validity, DefaultValidity)
	o.RenewAt = cmp.Or(o.RenewAt, DefaultRenewAt)
	o.CheckInterval = cmp.Or(o.CheckInterval, DefaultCheckInterval)
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.CAValidity < 0:
		return fmt.Errorf("certs: %w: CAValidity %s is negative", ErrInvalidOptions, o.CAValidity)
	case o.Validity < 0:
		return fmt.Errorf("certs: %w: Validity %s is negative", ErrInvalidOptions, o.Validity)
	case o.CheckInterval < 0:
		return fmt.Errorf("certs: %w: CheckInterval %s is negative", ErrInvalidOptions, o.CheckInterval)
	case math.IsNaN(o.RenewAt) || o.RenewAt < minRenewAt || o.RenewAt >= maxRenewAt:
		return fmt.Errorf("certs: %w: RenewAt %v is outside [%v, %v)", ErrInvalidOptions, o.RenewAt, minRenewAt, maxRenewAt)
	}
	return nil
}

// sans is the set of subject alternative names the serving certificate must carry.
type sans struct {
	dns []string // lower-case, deduplicated, in first-seen order
	ips []net.IP // deduplicated, in first-seen order
}

// wantedSANs returns the always-present SANs plus o.DNSNames, split into DNS names and IPs.
func (o *Options) wantedSANs() sans {
	var s sans
	addDNS := func(name string) {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			return
		}
		for _, have := range s.dns {
			if have == name {
				return
			}
		}
		s.dns = append(s.dns, name)
	}
	addIP := func(ip net.IP) {
		for _, have := range s.ips {
			if have.Equal(ip) {
				return
			}
		}
		s.ips = append(s.ips, ip)
	}
	for _, n := range defaultDNSNames {
		addDNS(n)
	}
	for _, ip := range defaultIPs {
		addIP(ip)
	}
	for _, n := range o.DNSNames {
		if ip := net.ParseIP(strings.TrimSpace(n)); ip != nil {
			addIP(ip)
			continue
		}
		addDNS(n)
	}
	return s
}

// backdate returns how far before the moment of issue NotBefore is set for a certificate of
// the given validity.
func backdate(validity time.Duration) time.Duration {
	return min(maxBackdate, validity/20)
}
