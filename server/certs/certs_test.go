package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEnsureCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	res, err := Ensure(dir, []string{"mail.test"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.CreatedCA || !res.CreatedLeaf {
		t.Fatalf("CreatedCA=%v CreatedLeaf=%v, want both true", res.CreatedCA, res.CreatedLeaf)
	}
	if res.CAPath != filepath.Join(dir, "ca.pem") || res.CertPath != filepath.Join(dir, "cert.pem") || res.KeyPath != filepath.Join(dir, "key.pem") {
		t.Errorf("paths = %q %q %q", res.CAPath, res.CertPath, res.KeyPath)
	}

	modes := map[string]fs.FileMode{
		"ca.pem":     0o644,
		"ca-key.pem": 0o600,
		"cert.pem":   0o644,
		"key.pem":    0o600,
	}
	for name, want := range modes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm() != want {
			t.Errorf("%s mode = %v, want %v", name, fi.Mode().Perm(), want)
		}
	}
	if fi, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	} else if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v, want 0700", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(modes) {
		t.Errorf("dir holds %d entries, want %d (temp files left behind?)", len(entries), len(modes))
	}

	for _, name := range []string{"ca-key.pem", "key.pem"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil || block.Type != "PRIVATE KEY" {
			t.Fatalf("%s: want a PRIVATE KEY pem block", name)
		}
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if k, ok := key.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
			t.Errorf("%s: key is %T, want ECDSA P-256", name, key)
		}
	}

	ca := readCert(t, res.CAPath)
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("ca: IsCA=%v KeyUsage=%v", ca.IsCA, ca.KeyUsage)
	}
	if ca.Subject.CommonName != "capture local CA" {
		t.Errorf("ca CommonName = %q", ca.Subject.CommonName)
	}
	if got := ca.NotAfter.Sub(ca.NotBefore); got < 365*24*time.Hour*10 || got > 366*24*time.Hour*10 {
		t.Errorf("ca validity = %v, want 10 years", got)
	}

	leaf := res.Certificate.Leaf
	if leaf == nil {
		t.Fatal("Certificate.Leaf is nil")
	}
	if len(res.Certificate.Certificate) != 1 || !bytes.Equal(res.Certificate.Certificate[0], leaf.Raw) {
		t.Errorf("chain holds %d certificates, want the leaf alone", len(res.Certificate.Certificate))
	}
	if !bytes.Equal(readCert(t, res.CertPath).Raw, leaf.Raw) {
		t.Error("cert.pem differs from Certificate.Leaf")
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got > 825*24*time.Hour {
		t.Errorf("leaf validity = %v, want at most 825 days", got)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("leaf ExtKeyUsage = %v, want ServerAuth", leaf.ExtKeyUsage)
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		t.Errorf("leaf not signed by ca: %v", err)
	}
	if ca.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Error("ca and leaf share a serial")
	}
}

func TestHandshake(t *testing.T) {
	dir := t.TempDir()
	res, err := Ensure(dir, []string{"mail.test"})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, ServerConfig(res.Certificate))
	roots := rootsFrom(t, dir)

	tests := []struct {
		serverName string
		ok         bool
	}{
		{"localhost", true},
		{"127.0.0.1", true},
		{"::1", true},
		{"mail.test", true},
		{"MAIL.test", true},
		{"other.test", false},
		{"10.0.0.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.serverName, func(t *testing.T) {
			err := handshake(t, addr, &tls.Config{RootCAs: roots, ServerName: tt.serverName})
			if tt.ok && err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if !tt.ok && err == nil {
				t.Fatal("handshake succeeded, want a verification error")
			}
		})
	}

	t.Run("untrusted", func(t *testing.T) {
		other, err := Ensure(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(readCert(t, other.CAPath))
		if err := handshake(t, addr, &tls.Config{RootCAs: pool, ServerName: "localhost"}); err == nil {
			t.Fatal("handshake with another CA succeeded")
		}
	})
}

func TestMinVersion(t *testing.T) {
	res, err := Ensure(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ServerConfig(res.Certificate)
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x, want TLS 1.2", cfg.MinVersion)
	}
	addr := serve(t, cfg)
	old := &tls.Config{
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS10,
		MaxVersion:         tls.VersionTLS11,
	}
	if err := handshake(t, addr, old); err == nil {
		t.Fatal("TLS 1.1 handshake succeeded")
	} else if !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1 handshake: %v, want a protocol version alert", err)
	}
	tls12 := &tls.Config{
		InsecureSkipVerify: true,
		MaxVersion:         tls.VersionTLS12,
	}
	if err := handshake(t, addr, tls12); err != nil {
		t.Fatalf("TLS 1.2 handshake: %v", err)
	}
}

func TestEnsureReuses(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"mail.test", "192.0.2.1"}
	first, err := Ensure(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	// The same hosts in another spelling, plus ones already required.
	second, err := Ensure(dir, []string{"MAIL.test.", " 192.0.2.1", "localhost", "::1", "[::1]", "127.0.0.1", "::ffff:127.0.0.1", ""})
	if err != nil {
		t.Fatal(err)
	}
	if second.CreatedCA || second.CreatedLeaf {
		t.Fatalf("CreatedCA=%v CreatedLeaf=%v, want both false", second.CreatedCA, second.CreatedLeaf)
	}
	if first.Certificate.Leaf.SerialNumber.Cmp(second.Certificate.Leaf.SerialNumber) != 0 {
		t.Error("leaf serial changed")
	}
	if readCert(t, first.CAPath).SerialNumber.Cmp(readCert(t, second.CAPath).SerialNumber) != 0 {
		t.Error("ca serial changed")
	}
	if second.Certificate.PrivateKey == nil {
		t.Error("reused certificate has no private key")
	}
	// The reused pair must still serve.
	addr := serve(t, ServerConfig(second.Certificate))
	if err := handshake(t, addr, &tls.Config{RootCAs: rootsFrom(t, dir), ServerName: "mail.test"}); err != nil {
		t.Fatalf("handshake with reused certificate: %v", err)
	}
}

func TestEnsureSANs(t *testing.T) {
	res, err := Ensure(t.TempDir(), []string{"Mail.Test", "mail.test", "localhost", "127.0.0.1", "::1", "192.0.2.1", "2001:db8::1", "[2001:db8::1]", "*.wild.test"})
	if err != nil {
		t.Fatal(err)
	}
	leaf := res.Certificate.Leaf
	wantDNS := []string{"localhost", "mail.test", "*.wild.test"}
	if !slices.Equal(leaf.DNSNames, wantDNS) {
		t.Errorf("DNSNames = %q, want %q", leaf.DNSNames, wantDNS)
	}
	var gotIPs []string
	for _, ip := range leaf.IPAddresses {
		gotIPs = append(gotIPs, ip.String())
	}
	wantIPs := []string{"127.0.0.1", "::1", "192.0.2.1", "2001:db8::1"}
	if !slices.Equal(gotIPs, wantIPs) {
		t.Errorf("IPAddresses = %q, want %q", gotIPs, wantIPs)
	}
}

func TestEnsureRegeneratesLeaf(t *testing.T) {
	tests := []struct {
		name  string
		hosts []string
		spoil func(t *testing.T, dir string)
	}{
		{"cert deleted", nil, func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "cert.pem"))
		}},
		{"key deleted", nil, func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "key.pem"))
		}},
		{"cert garbage", nil, func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "cert.pem"), []byte("not a certificate"), 0o644)
		}},
		{"key from another pair", nil, func(t *testing.T, dir string) {
			other := t.TempDir()
			if _, err := Ensure(other, nil); err != nil {
				t.Fatal(err)
			}
			copyFile(t, filepath.Join(other, "key.pem"), filepath.Join(dir, "key.pem"))
		}},
		{"signed by another ca", nil, func(t *testing.T, dir string) {
			other := t.TempDir()
			if _, err := Ensure(other, nil); err != nil {
				t.Fatal(err)
			}
			copyFile(t, filepath.Join(other, "cert.pem"), filepath.Join(dir, "cert.pem"))
			copyFile(t, filepath.Join(other, "key.pem"), filepath.Join(dir, "key.pem"))
		}},
		{"leaf expiring", nil, func(t *testing.T, dir string) {
			writeExpiringLeaf(t, dir)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := Ensure(dir, tt.hosts)
			if err != nil {
				t.Fatal(err)
			}
			tt.spoil(t, dir)
			res, err := Ensure(dir, tt.hosts)
			if err != nil {
				t.Fatal(err)
			}
			if res.CreatedCA || !res.CreatedLeaf {
				t.Fatalf("CreatedCA=%v CreatedLeaf=%v, want false, true", res.CreatedCA, res.CreatedLeaf)
			}
			if readCert(t, first.CAPath).SerialNumber.Cmp(readCert(t, res.CAPath).SerialNumber) != 0 {
				t.Error("ca serial changed")
			}
			if res.Certificate.Leaf.SerialNumber.Cmp(first.Certificate.Leaf.SerialNumber) == 0 {
				t.Error("leaf serial unchanged")
			}
			serverName := "localhost"
			if len(tt.hosts) > 0 {
				serverName = tt.hosts[0]
			}
			addr := serve(t, ServerConfig(res.Certificate))
			if err := handshake(t, addr, &tls.Config{RootCAs: rootsFrom(t, dir), ServerName: serverName}); err != nil {
				t.Fatalf("handshake %s: %v", serverName, err)
			}
			// And from disk, as another process would load it.
			if _, err := Load(res.CertPath, res.KeyPath); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEnsureRegeneratesCA(t *testing.T) {
	tests := []struct {
		name     string
		spoil    func(t *testing.T, dir string)
		replaced string // why the old CA is said to be replaced, "" when none was read
	}{
		{"ca expiring", func(t *testing.T, dir string) {
			writeCA(t, dir, time.Now().Add(10*24*time.Hour))
		}, "ca expires soon"},
		{"ca deleted", func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "ca.pem"))
		}, ""},
		{"ca key deleted", func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "ca-key.pem"))
		}, ""},
		{"ca key garbage", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "ca-key.pem"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600)
		}, ""},
		// As versions before name constraints made it: it could vouch
		// for any site.
		{"ca without name constraints", func(t *testing.T, dir string) {
			writeCA(t, dir, time.Now().AddDate(5, 0, 0))
		}, "it had no name constraints, so trusting it vouched for any site"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := Ensure(dir, []string{"mail.test"})
			if err != nil {
				t.Fatal(err)
			}
			oldCA := readCert(t, first.CAPath)
			tt.spoil(t, dir)
			res, err := Ensure(dir, []string{"mail.test"})
			if err != nil {
				t.Fatal(err)
			}
			if !res.CreatedCA || !res.CreatedLeaf {
				t.Fatalf("CreatedCA=%v CreatedLeaf=%v, want both true", res.CreatedCA, res.CreatedLeaf)
			}
			if res.ReplacedCA != tt.replaced {
				t.Errorf("ReplacedCA = %q, want %q", res.ReplacedCA, tt.replaced)
			}
			ca := readCert(t, res.CAPath)
			if ca.SerialNumber.Cmp(oldCA.SerialNumber) == 0 {
				t.Error("ca serial unchanged")
			}
			if time.Until(ca.NotAfter) < 9*365*24*time.Hour {
				t.Errorf("new ca expires %v", ca.NotAfter)
			}
			if err := res.Certificate.Leaf.CheckSignatureFrom(ca); err != nil {
				t.Errorf("leaf not signed by the new ca: %v", err)
			}
			addr := serve(t, ServerConfig(res.Certificate))
			if err := handshake(t, addr, &tls.Config{RootCAs: rootsFrom(t, dir), ServerName: "mail.test"}); err != nil {
				t.Fatalf("handshake: %v", err)
			}
		})
	}
}

// On a storage that running servers share, a sound CA made for other
// names is kept, and the server asking for them is refused: replacing it
// would leave the others presenting certificates it no longer vouches for.
func TestEnsureSharedKeepsTheCA(t *testing.T) {
	dir := t.TempDir()
	first, err := EnsureShared(Dir(dir), []string{"mail.test"})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(first.CAPath)
	_, err = EnsureShared(Dir(dir), []string{"other.test"})
	if err == nil || !strings.Contains(err.Error(), "mail.test") || !strings.Contains(err.Error(), "other.test") ||
		!strings.Contains(err.Error(), "same --smtp-host") {
		t.Fatalf("other names: %v, want a refusal naming both", err)
	}
	if now, _ := os.ReadFile(first.CAPath); !bytes.Equal(now, caPEM) {
		t.Error("the shared CA was replaced")
	}
	again, err := EnsureShared(Dir(dir), []string{"mail.test"})
	if err != nil || again.CreatedCA || again.CreatedLeaf {
		t.Fatalf("same names again: %+v, %v; want the stored ones", again, err)
	}
	// Where one server alone uses the storage, new names make a new CA.
	if res, err := EnsureIn(Dir(dir), []string{"other.test"}); err != nil || !res.CreatedCA {
		t.Fatalf("unshared, other names: %+v, %v; want a new CA", res, err)
	}
}

// The CA can vouch for the server certificate's names only: a certificate
// it signs for any other name fails crypto/x509 verification, so trusting
// ca.pem never lets it impersonate another site.
func TestCAIsNameConstrained(t *testing.T) {
	dir := t.TempDir()
	res, err := Ensure(dir, []string{"mail.test", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, res.CAPath)
	if !ca.PermittedDNSDomainsCritical || !slices.Equal(ca.PermittedDNSDomains, []string{"localhost", "mail.test"}) {
		t.Errorf("permitted DNS domains %v (critical %v)", ca.PermittedDNSDomains, ca.PermittedDNSDomainsCritical)
	}
	var ranges []string
	for _, r := range ca.PermittedIPRanges {
		ranges = append(ranges, r.String())
	}
	if !slices.Equal(ranges, []string{"127.0.0.1/32", "::1/128", "192.0.2.7/32"}) {
		t.Errorf("permitted IP ranges %v", ranges)
	}

	roots := rootsFrom(t, dir)
	verify := func(leaf *x509.Certificate, name string) error {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name})
		return err
	}
	for _, name := range []string{"localhost", "mail.test", "127.0.0.1", "::1", "192.0.2.7"} {
		if err := verify(res.Certificate.Leaf, name); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	for _, other := range []struct {
		dns []string
		ips []net.IP
	}{
		{dns: []string{"example.com"}},
		{dns: []string{"mail.test.example.com"}},
		{dns: []string{"localhost", "bank.example"}},
		{ips: []net.IP{net.ParseIP("10.0.0.1")}},
	} {
		leaf := signLeaf(t, dir, other.dns, other.ips)
		name := leaf.Subject.CommonName
		err := verify(leaf, name)
		var invalid x509.CertificateInvalidError
		if !errors.As(err, &invalid) || invalid.Reason != x509.CANotAuthorizedForThisName {
			t.Errorf("certificate for %v %v signed by the local CA: %v, want CANotAuthorizedForThisName", other.dns, other.ips, err)
		}
	}

	// A new host needs a new CA: the old one cannot vouch for it.
	again, err := Ensure(dir, []string{"new.test"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.CreatedCA || !again.CreatedLeaf {
		t.Fatalf("CreatedCA=%v CreatedLeaf=%v after a new host, want both true", again.CreatedCA, again.CreatedLeaf)
	}
	if err := verify(again.Certificate.Leaf, "new.test"); err == nil {
		t.Error("the old CA verifies the new host")
	}
	if _, err := again.Certificate.Leaf.Verify(x509.VerifyOptions{Roots: rootsFrom(t, dir), DNSName: "new.test"}); err != nil {
		t.Errorf("new.test under the new CA: %v", err)
	}
}

// signLeaf signs a server certificate for the given names with the CA in
// dir, as anyone holding its key could; its common name is the first name.
func signLeaf(t *testing.T, dir string, dnsNames []string, ips []net.IP) *x509.Certificate {
	t.Helper()
	ca := readCert(t, filepath.Join(dir, "ca.pem"))
	data, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := parseKey(data)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	if len(dnsNames) > 0 {
		name = dnsNames[len(dnsNames)-1]
	} else {
		name = ips[0].String()
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(99),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	res, err := Ensure(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := Load(res.CertPath, res.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Leaf == nil || !bytes.Equal(cert.Leaf.Raw, res.Certificate.Leaf.Raw) {
		t.Error("Load did not return the leaf")
	}

	missing := filepath.Join(dir, "missing.pem")
	garbage := filepath.Join(dir, "garbage.pem")
	write(t, garbage, []byte("nothing here"), 0o644)
	tests := []struct {
		name      string
		cert, key string
		notExist  bool
	}{
		{"missing cert", missing, res.KeyPath, true},
		{"missing key", res.CertPath, missing, true},
		{"garbage cert", garbage, res.KeyPath, false},
		{"garbage key", res.CertPath, garbage, false},
		{"mismatched", res.CertPath, filepath.Join(dir, "ca-key.pem"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.cert, tt.key)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			named := missing
			if !tt.notExist {
				named = tt.cert
			}
			if !strings.Contains(err.Error(), named) {
				t.Errorf("error %q does not name %s", err, named)
			}
			if errors.Is(err, fs.ErrNotExist) != tt.notExist {
				t.Errorf("errors.Is(err, fs.ErrNotExist) = %v", !tt.notExist)
			}
		})
	}
}

func TestCAPEM(t *testing.T) {
	dir := t.TempDir()
	_, err := CAPEM(dir)
	if err == nil {
		t.Fatal("CAPEM succeeded before any CA")
	}
	if want := "no CA yet in " + dir + ": run `capture serve` once"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("error does not wrap fs.ErrNotExist")
	}

	res, err := Ensure(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CAPEM(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(res.CAPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("CAPEM differs from ca.pem")
	}

	write(t, res.CAPath, []byte("garbage"), 0o644)
	if _, err := CAPEM(dir); err == nil || !strings.Contains(err.Error(), res.CAPath) {
		t.Errorf("CAPEM on garbage: %v, want an error naming %s", err, res.CAPath)
	}
}

// serve runs a TLS listener on a loopback port that completes one handshake
// per connection, until the test ends.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				// Failures here are the client's to report.
				_ = tls.Server(conn, cfg).Handshake()
			})
		}
	})
	return ln.Addr().String()
}

func handshake(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

func rootsFrom(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	data, err := CAPEM(dir)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatal("ca.pem holds no certificate")
	}
	return pool
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no CERTIFICATE block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// writeCA replaces the CA in dir with a valid one that expires at notAfter.
func writeCA(t *testing.T, dir string, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               pkix.Name{CommonName: "capture local CA"},
		NotBefore:             notAfter.AddDate(-1, 0, 0),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"), der, key)
}

// writeExpiringLeaf replaces the leaf in dir with one signed by the current
// CA, for the right names, that expires in 10 days.
func writeExpiringLeaf(t *testing.T, dir string) {
	t.Helper()
	ca := readCert(t, filepath.Join(dir, "ca.pem"))
	data, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	caKey, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), der, key)
}

func writePair(t *testing.T, certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	write(t, keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func write(t *testing.T, path string, data []byte, perm fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, data, 0o600)
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
