package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Now().Truncate(time.Second)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newAuthority returns an Authority for opts, with the fake clock when opts.Now is nil.
func newAuthority(t *testing.T, opts Options) *Authority {
	t.Helper()
	a, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func mustEnsure(t *testing.T, a *Authority) {
	t.Helper()
	if err := a.Ensure(); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
}

// snapshot returns the content of every regular file in dir, by name.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read dir: %v", err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("read %s: %v", e.Name(), err)
		}
		out[e.Name()] = b
	}
	return out
}

func parseCertFile(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := readCertificate(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fractionOf(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f)
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		opts Options
	}{
		{"empty Dir is rejected", Options{}},
		{"blank Dir is rejected", Options{Dir: "  "}},
		{"negative Validity is rejected", Options{Dir: dir, Validity: -time.Hour}},
		{"negative CAValidity is rejected", Options{Dir: dir, CAValidity: -time.Hour}},
		{"negative CheckInterval is rejected", Options{Dir: dir, CheckInterval: -time.Second}},
		{"RenewAt of 1 is rejected", Options{Dir: dir, RenewAt: 1}},
		{"RenewAt below 0.05 is rejected", Options{Dir: dir, RenewAt: 0.01}},
		{"negative RenewAt is rejected", Options{Dir: dir, RenewAt: -0.5}},
		{"NaN RenewAt is rejected", Options{Dir: dir, RenewAt: math.NaN()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New error = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	a := newAuthority(t, Options{Dir: t.TempDir()})
	o := a.opts
	if o.CAValidity != DefaultCAValidity || o.Validity != DefaultValidity || o.RenewAt != DefaultRenewAt ||
		o.CheckInterval != DefaultCheckInterval || o.Now == nil {
		t.Fatalf("defaults not applied: %+v", o)
	}
	o.Log.Info("the default logger discards") // must not panic
	if DefaultRenewAt != 2.0/3 || DefaultCAValidity != 3650*24*time.Hour || DefaultValidity != 365*24*time.Hour {
		t.Fatal("default constants changed")
	}
}

func TestEnsureOnAFreshDirCreatesAllFourFilesWithTheRightModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "certs")
	a := newAuthority(t, Options{Dir: dir, Now: newFakeClock().Now})
	mustEnsure(t, a)

	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o700 {
		t.Errorf("dir mode = %o, want 700", got)
	}
	want := map[string]fs.FileMode{"tls.crt": 0o644, "tls.key": 0o600, "ca.crt": 0o644, "ca.key": 0o600}
	for name, mode := range want {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := st.Mode().Perm(); got != mode {
			t.Errorf("%s mode = %o, want %o", name, got, mode)
		}
	}
	if got := len(snapshot(t, dir)); got != 4 {
		t.Errorf("dir holds %d files, want exactly 4 (no temporary files left)", got)
	}
	if a.UserSupplied() {
		t.Error("UserSupplied() = true for generated certificates")
	}
	if a.CertFile() != filepath.Join(dir, "tls.crt") || a.KeyFile() != filepath.Join(dir, "tls.key") ||
		a.CAFile() != filepath.Join(dir, "ca.crt") {
		t.Errorf("paths = %s %s %s", a.CertFile(), a.KeyFile(), a.CAFile())
	}
}

func TestGeneratedCertificatesHaveTheRequiredShape(t *testing.T) {
	a := newAuthority(t, Options{
		Dir:      t.TempDir(),
		DNSNames: []string{"synchook.vcluster.svc", "10.0.0.7", "LOCALHOST", "", "fd00::1", "synchook.vcluster.svc"},
		Now:      newFakeClock().Now,
	})
	mustEnsure(t, a)
	leaf := parseCertFile(t, a.CertFile())
	ca := parseCertFile(t, a.CAFile())

	if want := []string{"localhost", "synchook.vcluster.svc"}; !slices.Equal(leaf.DNSNames, want) {
		t.Errorf("DNSNames = %q, want %q", leaf.DNSNames, want)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"127.0.0.1", "::1", "10.0.0.7", "fd00::1"}; !slices.Equal(ips, want) {
		t.Errorf("IPAddresses = %q, want %q", ips, want)
	}
	if leaf.Subject.CommonName != "synchook" {
		t.Errorf("leaf CommonName = %q", leaf.Subject.CommonName)
	}
	if leaf.IsCA || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) ||
		leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		t.Errorf("leaf usage: IsCA=%v ExtKeyUsage=%v KeyUsage=%v", leaf.IsCA, leaf.ExtKeyUsage, leaf.KeyUsage)
	}
	if !ca.IsCA || !ca.BasicConstraintsValid || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA usage: IsCA=%v KeyUsage=%v", ca.IsCA, ca.KeyUsage)
	}
	for name, c := range map[string]*x509.Certificate{"leaf": leaf, "ca": ca} {
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() {
			t.Errorf("%s key is %T, want ECDSA P-256", name, c.PublicKey)
		}
		if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
			t.Errorf("%s serial %s is not a positive 128-bit number", name, c.SerialNumber)
		}
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got < DefaultValidity || got > DefaultValidity+maxBackdate {
		t.Errorf("leaf lifetime = %s, want about %s", got, DefaultValidity)
	}
	if got := ca.NotAfter.Sub(ca.NotBefore); got < DefaultCAValidity || got > DefaultCAValidity+maxBackdate {
		t.Errorf("CA lifetime = %s, want about %s", got, DefaultCAValidity)
	}
	for _, path := range []string{a.KeyFile(), a.caKeyFile()} {
		b, _ := os.ReadFile(path)
		if block, _ := pem.Decode(b); block == nil || block.Type != "PRIVATE KEY" {
			t.Errorf("%s is not a PEM PRIVATE KEY", path)
		}
	}
}

func TestServingCertificateVerifiesAgainstCAFile(t *testing.T) {
	clock := newFakeClock()
	a := newAuthority(t, Options{Dir: t.TempDir(), DNSNames: []string{"synchook.example"}, Now: clock.Now})
	mustEnsure(t, a)
	pool, err := LoadCertPool(a.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseCertFile(t, a.CertFile())
	for _, name := range []string{"localhost", "127.0.0.1", "::1", "synchook.example"} {
		_, err := leaf.Verify(x509.VerifyOptions{
			DNSName:     name,
			Roots:       pool,
			CurrentTime: clock.Now(),
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			t.Errorf("Verify for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: pool, CurrentTime: clock.Now()}); err == nil {
		t.Error("Verify for a name not in the SANs succeeded")
	}
}

func TestEnsureRenewsOnlyWhatIsDue(t *testing.T) {
	tests := []struct {
		name         string
		firstDNS     []string
		secondDNS    []string
		advance      time.Duration
		wantNewCA    bool
		wantNewLeaf  bool
		wantSANAdded string
	}{
		{name: "a second Ensure at once reuses everything"},
		{name: "a leaf before 2/3 of its lifetime is kept", advance: fractionOf(DefaultValidity, 0.6)},
		{name: "a leaf past 2/3 of its lifetime is re-issued and the CA kept", advance: fractionOf(DefaultValidity, 0.7), wantNewLeaf: true},
		{name: "an expired leaf is re-issued and the CA kept", advance: DefaultValidity + time.Hour, wantNewLeaf: true},
		{name: "a CA before 2/3 of its lifetime is kept", advance: fractionOf(DefaultCAValidity, 0.6), wantNewLeaf: true},
		{name: "a CA past 2/3 of its lifetime is re-issued with a new leaf", advance: fractionOf(DefaultCAValidity, 0.7), wantNewCA: true, wantNewLeaf: true},
		{name: "a new DNS name forces a new leaf", secondDNS: []string{"new.example"}, wantNewLeaf: true, wantSANAdded: "new.example"},
		{name: "a new IP forces a new leaf", secondDNS: []string{"192.0.2.1"}, wantNewLeaf: true},
		{name: "a dropped DNS name keeps the leaf", firstDNS: []string{"old.example"}},
		{name: "the same DNS name in other case keeps the leaf", firstDNS: []string{"Svc.Example"}, secondDNS: []string{"svc.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := newFakeClock()
			mustEnsure(t, newAuthority(t, Options{Dir: dir, DNSNames: tt.firstDNS, Now: clock.Now}))
			before := snapshot(t, dir)

			clock.Advance(tt.advance)
			a := newAuthority(t, Options{Dir: dir, DNSNames: tt.secondDNS, Now: clock.Now})
			mustEnsure(t, a)
			after := snapshot(t, dir)

			changed := func(name string) bool { return !bytes.Equal(before[name], after[name]) }
			if changed("ca.crt") != tt.wantNewCA || changed("ca.key") != tt.wantNewCA {
				t.Errorf("CA changed = %v/%v, want %v", changed("ca.crt"), changed("ca.key"), tt.wantNewCA)
			}
			if changed("tls.crt") != tt.wantNewLeaf || changed("tls.key") != tt.wantNewLeaf {
				t.Errorf("leaf changed = %v/%v, want %v", changed("tls.crt"), changed("tls.key"), tt.wantNewLeaf)
			}
			leaf := parseCertFile(t, a.CertFile())
			if tt.wantSANAdded != "" && !slices.Contains(leaf.DNSNames, tt.wantSANAdded) {
				t.Errorf("DNSNames = %q, want %q among them", leaf.DNSNames, tt.wantSANAdded)
			}
			if len(after) != 4 {
				t.Errorf("dir holds %d files, want 4", len(after))
			}
			pool, err := LoadCertPool(a.CAFile())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool, CurrentTime: clock.Now()}); err != nil {
				t.Errorf("leaf does not verify after Ensure: %v", err)
			}
		})
	}
}

func TestLeafNeverOutlivesItsCA(t *testing.T) {
	clock := newFakeClock()
	a := newAuthority(t, Options{Dir: t.TempDir(), CAValidity: 24 * time.Hour, Validity: 48 * time.Hour, Now: clock.Now})
	mustEnsure(t, a)
	leaf, ca := parseCertFile(t, a.CertFile()), parseCertFile(t, a.CAFile())
	if !leaf.NotAfter.Equal(ca.NotAfter) {
		t.Errorf("leaf NotAfter %s, want the CA's %s", leaf.NotAfter, ca.NotAfter)
	}
	before := snapshot(t, a.opts.Dir)
	mustEnsure(t, a)
	if !equalSnapshots(before, snapshot(t, a.opts.Dir)) {
		t.Error("a cut leaf was re-issued at once")
	}
}

func equalSnapshots(a, b map[string][]byte) bool {
	return len(a) == len(b) && func() bool {
		for k, v := range a {
			if !bytes.Equal(v, b[k]) {
				return false
			}
		}
		return true
	}()
}

// userPair writes a serving certificate and key made by another Authority (at the given
// clock offset) into dir as tls.crt and tls.key only.
func userPair(t *testing.T, dir string, offset time.Duration) {
	t.Helper()
	clock := newFakeClock()
	clock.Advance(offset)
	src := newAuthority(t, Options{Dir: t.TempDir(), Now: clock.Now})
	mustEnsure(t, src)
	for _, name := range []string{"tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(src.opts.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

func TestUserSuppliedCertificatesAreLeftByteIdentical(t *testing.T) {
	dir := t.TempDir()
	userPair(t, dir, 0)
	before := snapshot(t, dir)
	clock := newFakeClock()
	a := newAuthority(t, Options{Dir: dir, DNSNames: []string{"not-in-the-user-cert.example"}, Now: clock.Now})
	if a.UserSupplied() {
		t.Error("UserSupplied() = true before Ensure")
	}
	mustEnsure(t, a)
	if !a.UserSupplied() {
		t.Error("UserSupplied() = false, want true")
	}
	clock.Advance(fractionOf(DefaultValidity, 0.9)) // past the renew point: still untouched
	mustEnsure(t, a)
	if !equalSnapshots(before, snapshot(t, dir)) {
		t.Error("user-supplied directory was changed")
	}
	st, err := os.Stat(a.CertFile())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("tls.crt mode changed to %o", st.Mode().Perm())
	}
	if _, err := os.Stat(a.CAFile()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ca.crt was created: %v", err)
	}
}

func TestInvalidUserSuppliedCertificatesMakeEnsureFail(t *testing.T) {
	otherKey := func(t *testing.T, dir string) {
		other := t.TempDir()
		userPair(t, other, 0)
		b, _ := os.ReadFile(filepath.Join(other, "tls.key"))
		if err := os.WriteFile(filepath.Join(dir, "tls.key"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		offset  time.Duration
		mangle  func(t *testing.T, dir string)
		wantErr error
	}{
		{"a corrupted PEM certificate fails", 0, corrupt("tls.crt"), ErrInvalidPEM},
		{"a certificate file without PEM fails", 0, overwrite("tls.crt", "not a certificate"), ErrNoCertificates},
		{"a key file without PEM fails", 0, overwrite("tls.key", "not a key"), ErrInvalidPEM},
		{"a key of another certificate fails", 0, otherKey, ErrKeyMismatch},
		{"an expired certificate fails", -2 * DefaultValidity, nil, ErrNotValidNow},
		{"a not yet valid certificate fails", time.Hour, nil, ErrNotValidNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			userPair(t, dir, tt.offset)
			if tt.mangle != nil {
				tt.mangle(t, dir)
			}
			before := snapshot(t, dir)
			a := newAuthority(t, Options{Dir: dir, Now: newFakeClock().Now})
			err := a.Ensure()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Ensure error = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the path", err)
			}
			if !a.UserSupplied() {
				t.Error("UserSupplied() = false")
			}
			if !equalSnapshots(before, snapshot(t, dir)) {
				t.Error("user-supplied directory was changed")
			}
		})
	}
}

// corrupt flips bytes inside the base64 body of the PEM file name, keeping the armour.
func corrupt(name string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			t.Fatalf("%s is not PEM", name)
		}
		for i := 10; i < 40 && i < len(block.Bytes); i++ {
			block.Bytes[i] ^= 0xff
		}
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// overwrite replaces the file name with content.
func overwrite(name, content string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDamagedFilesInAnOwnedDirAreRegenerated(t *testing.T) {
	foreignCA := func(t *testing.T, dir string) {
		other := newAuthority(t, Options{Dir: t.TempDir(), Now: newFakeClock().Now})
		mustEnsure(t, other)
		b, _ := os.ReadFile(other.CAFile())
		if err := os.WriteFile(filepath.Join(dir, "ca.crt"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		mangle    func(t *testing.T, dir string)
		wantNewCA bool
	}{
		{"a corrupted tls.crt is regenerated", corrupt("tls.crt"), false},
		{"a tls.crt without PEM is regenerated", overwrite("tls.crt", "garbage"), false},
		{"an empty tls.crt is regenerated", overwrite("tls.crt", ""), false},
		{"a corrupted tls.key is regenerated", corrupt("tls.key"), false},
		{"a missing tls.crt is regenerated", func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, "tls.crt")) }, false},
		{"a corrupted ca.key regenerates CA and leaf", corrupt("ca.key"), true},
		{"a corrupted ca.crt regenerates CA and leaf", corrupt("ca.crt"), true},
		{"a missing ca.crt regenerates CA and leaf", func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, "ca.crt")) }, true},
		{"a ca.crt not matching ca.key regenerates CA and leaf", foreignCA, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := newFakeClock()
			a := newAuthority(t, Options{Dir: dir, Now: clock.Now})
			mustEnsure(t, a)
			orig := snapshot(t, dir)
			tt.mangle(t, dir)

			if err := a.Ensure(); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if a.UserSupplied() {
				t.Error("UserSupplied() = true for an owned dir")
			}
			after := snapshot(t, dir)
			if newCA := !bytes.Equal(orig["ca.key"], after["ca.key"]); newCA != tt.wantNewCA {
				t.Errorf("new CA = %v, want %v", newCA, tt.wantNewCA)
			}
			if bytes.Equal(orig["tls.key"], after["tls.key"]) {
				t.Error("leaf was not re-issued")
			}
			if _, err := tls.LoadX509KeyPair(a.CertFile(), a.KeyFile()); err != nil {
				t.Errorf("regenerated pair does not load: %v", err)
			}
			pool, err := LoadCertPool(a.CAFile())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parseCertFile(t, a.CertFile()).Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool, CurrentTime: clock.Now()}); err != nil {
				t.Errorf("regenerated leaf does not verify: %v", err)
			}
		})
	}
}

func TestEnsureFailsWhenDirCannotBeCreated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuthority(t, Options{Dir: filepath.Join(file, "certs")})
	if err := a.Ensure(); err == nil || !strings.HasPrefix(err.Error(), "certs: ") {
		t.Fatalf("Ensure error = %v, want a certs: error", err)
	}
}

func TestNotAfterReportsTheServingCertificateExpiry(t *testing.T) {
	a := newAuthority(t, Options{Dir: t.TempDir(), Now: newFakeClock().Now})
	if _, err := NotAfter(a.CertFile()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NotAfter before Ensure: error = %v, want fs.ErrNotExist", err)
	}
	mustEnsure(t, a)
	got, err := NotAfter(a.CertFile())
	if err != nil {
		t.Fatal(err)
	}
	if want := parseCertFile(t, a.CertFile()).NotAfter; !got.Equal(want) {
		t.Errorf("NotAfter = %s, want %s", got, want)
	}
}

func TestLoadCertPoolReportsBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{"a missing file fails", filepath.Join(dir, "missing.crt"), fs.ErrNotExist},
		{"a file without PEM fails", write("text.crt", "hello"), ErrNoCertificates},
		{"a file with only a key block fails", write("key.crt", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), ErrNoCertificates},
		{"a broken certificate block fails", write("broken.crt", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), ErrInvalidPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadCertPool(tt.path)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("LoadCertPool error = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("error %q does not name the path", err)
			}
		})
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		fmt.Fprintln(&s.b, prefix, args)
	}, funcr.Options{})
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunRenewsOnItsIntervalAndReturnsNilWhenTheContextEnds(t *testing.T) {
	clock := newFakeClock()
	var logs syncBuffer
	a := newAuthority(t, Options{Dir: t.TempDir(), CheckInterval: 5 * time.Millisecond, Now: clock.Now, Log: logs.logger()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	// waitFor polls cond (Run works on its own goroutine, on a real CheckInterval ticker).
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline, tick := time.NewTimer(10*time.Second), time.NewTicker(2*time.Millisecond)
		defer deadline.Stop()
		defer tick.Stop()
		for !cond() {
			select {
			case <-deadline.C:
				t.Fatalf("timed out waiting for %s", what)
			case <-tick.C:
			}
		}
	}
	var first []byte
	waitFor("the first certificate", func() bool {
		b, err := os.ReadFile(a.CertFile())
		first = b
		return err == nil && len(b) > 0
	})
	clock.Advance(fractionOf(DefaultValidity, 0.7))
	waitFor("the renewed certificate", func() bool {
		b, err := os.ReadFile(a.CertFile())
		return err == nil && len(b) > 0 && !bytes.Equal(b, first)
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context ended")
	}

	out := logs.String()
	if n := strings.Count(out, "issued new serving certificate"); n != 2 {
		t.Errorf("logged %d leaf issues, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "issued new CA certificate") {
		t.Errorf("CA issue not logged:\n%s", out)
	}
	for _, name := range []string{a.KeyFile(), a.caKeyFile()} {
		b, _ := os.ReadFile(name)
		block, _ := pem.Decode(b)
		body := strings.Split(string(b), "\n")[1]
		if block == nil || strings.Contains(out, body) || strings.Contains(out, "PRIVATE KEY") {
			t.Errorf("log may contain key material of %s", name)
		}
	}
}

func TestRunReturnsAtOnceForADoneContext(t *testing.T) {
	a := newAuthority(t, Options{Dir: filepath.Join(t.TempDir(), "unused")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if _, err := os.Stat(a.opts.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Run with a done context touched the dir: %v", err)
	}
}

func TestCertwatcherServesTheCertificateAndPicksUpARenewal(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	clock := newFakeClock()
	a := newAuthority(t, Options{Dir: t.TempDir(), Now: clock.Now})
	mustEnsure(t, a)

	watcher, err := certwatcher.New(a.CertFile(), a.KeyFile())
	if err != nil {
		t.Fatalf("certwatcher.New: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	// Like controller-runtime's webhook server, the TLS config has only GetCertificate. StartTLS
	// would add httptest's own certificate to Certificates, and crypto/tls then ignores
	// GetCertificate for clients that send no SNI (such as one dialling 127.0.0.1).
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the rejected handshake below is expected
	cfg := &tls.Config{GetCertificate: watcher.GetCertificate, MinVersion: tls.VersionTLS12}
	srv.Listener = tls.NewListener(srv.Listener, cfg)
	srv.Start()
	defer srv.Close()
	url := "https://" + srv.Listener.Addr().String()

	pool, err := LoadCertPool(a.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	// served connects with a fresh transport (no session reuse) that trusts only ca.crt and
	// returns the serial of the certificate the server presented.
	served := func(serverName string) *big.Int {
		t.Helper()
		tr := &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: serverName, Time: clock.Now, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			t.Fatalf("GET with ServerName %q: %v", serverName, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "ok" {
			t.Fatalf("body = %q", body)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber
	}

	first := served("") // verified against the 127.0.0.1 IP SAN
	if got := served("localhost"); got.Cmp(first) != 0 {
		t.Fatalf("serial changed between connections: %s then %s", first, got)
	}
	if host, _, _ := net.SplitHostPort(srv.Listener.Addr().String()); host != "127.0.0.1" {
		t.Fatalf("test server listens on %s, want 127.0.0.1 for the IP SAN check", host)
	}

	// A client trusting only the system roots must not accept the certificate.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{Time: clock.Now, MinVersion: tls.VersionTLS12}}}
	if resp, err := plain.Get(url); err == nil {
		resp.Body.Close()
		t.Error("a client without ca.crt accepted the certificate")
	}

	clock.Advance(fractionOf(DefaultValidity, 0.7))
	mustEnsure(t, a)
	if err := watcher.ReadCertificate(); err != nil {
		t.Fatalf("ReadCertificate: %v", err)
	}
	renewed := served("localhost")
	if renewed.Cmp(first) == 0 {
		t.Fatal("the served certificate did not change after renewal")
	}
	if want := parseCertFile(t, a.CertFile()).SerialNumber; renewed.Cmp(want) != 0 {
		t.Errorf("served serial %s, want the one in tls.crt %s", renewed, want)
	}
}

func TestUserSuppliedKeysInSEC1FormAreAccepted(t *testing.T) {
	dir := t.TempDir()
	userPair(t, dir, 0)
	key, err := readPrivateKey(filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	if block, _ := pem.Decode(sec1); block == nil || block.Type != "EC PRIVATE KEY" {
		t.Fatalf("re-encoded key is not an EC PRIVATE KEY block")
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), sec1, 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuthority(t, Options{Dir: dir, Now: newFakeClock().Now})
	mustEnsure(t, a)
	if !a.UserSupplied() {
		t.Error("UserSupplied() = false")
	}
}
