// Package certs keeps the local certificate authority and the server
// certificate it signs, so the SMTP listeners can offer TLS without any setup.
// Clients trust ca.pem once; the server certificate can then be reissued
// (new hosts, expiry) without asking them again.
package certs

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File names inside the TLS directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
	CertFile  = "cert.pem"
	KeyFile   = "key.pem"
)

const (
	caCommonName   = "capture local CA"
	leafCommonName = "capture"

	caValidityYears = 10
	// Apple platforms reject server certificates valid for longer than 825 days.
	leafValidity = 825 * 24 * time.Hour
	// Renew this long before expiry, so a long-running server or a client
	// with a slightly fast clock never meets an expired certificate.
	renewBefore = 30 * 24 * time.Hour
	// Backdate NotBefore a little to tolerate clock skew between machines.
	backdate = time.Hour
)

// Storage keeps the CA's and the certificate's PEM files by name (CAFile,
// CAKeyFile, CertFile, KeyFile): a directory (Dir), or the database that
// replicas share, so that every one presents the same certificate.
type Storage interface {
	// ReadFile returns an error wrapping fs.ErrNotExist for a file never
	// written.
	ReadFile(name string) ([]byte, error)
	// WriteFile replaces the file; private files hold a key.
	WriteFile(name string, data []byte, private bool) error
	// Path says where the file is, for people.
	Path(name string) string
}

// Dir is a directory of PEM files.
type Dir string

func (d Dir) ReadFile(name string) ([]byte, error) { return os.ReadFile(d.Path(name)) }
func (d Dir) Path(name string) string              { return filepath.Join(string(d), name) }

func (d Dir) WriteFile(name string, data []byte, private bool) error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return fmt.Errorf("create tls dir: %w", err)
	}
	perm := fs.FileMode(0o644)
	if private {
		perm = 0o600
	}
	return writeFile(d.Path(name), data, perm)
}

// Result says where the files are and what Ensure had to create.
type Result struct {
	CAPath, CertPath, KeyPath string
	CreatedCA, CreatedLeaf    bool
	// ReplacedCA says why an existing CA was replaced ("" when there was
	// none): clients that trusted it must trust the new ca.pem.
	ReplacedCA string
	// Certificate is the server certificate with its key and Leaf set. Its
	// chain holds the leaf only: clients are expected to trust ca.pem.
	Certificate tls.Certificate
}

// Ensure makes sure dir holds a usable local CA and a server certificate
// signed by it for localhost, 127.0.0.1, ::1 and every name in hosts,
// creating or replacing whatever is missing, unreadable, about to expire or
// no longer fits.
func Ensure(dir string, hosts []string) (*Result, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create tls dir: %w", err)
	}
	return EnsureIn(Dir(dir), hosts)
}

// EnsureIn is Ensure over any Storage. Callers sharing one storage make
// sure only one of them runs it at a time.
func EnsureIn(st Storage, hosts []string) (*Result, error) { return ensure(st, hosts, false) }

// EnsureShared is EnsureIn for a storage that servers already running
// share (replicas of one database): a CA that is sound but made for other
// names is not replaced, which would leave the others presenting
// certificates that the CA clients trust no longer vouches for. Starting
// with other names is refused instead.
func EnsureShared(st Storage, hosts []string) (*Result, error) { return ensure(st, hosts, true) }

func ensure(st Storage, hosts []string, shared bool) (*Result, error) {
	res := &Result{
		CAPath:   st.Path(CAFile),
		CertPath: st.Path(CertFile),
		KeyPath:  st.Path(KeyFile),
	}
	now := time.Now()
	dnsNames, ips := sans(hosts)

	ca, caKey, err := readPair(st, CAFile, CAKeyFile)
	if err == nil {
		err = checkCA(ca, dnsNames, ips, now)
		switch {
		case errors.Is(err, errOtherNames) && !ca.PermittedDNSDomainsCritical:
			res.ReplacedCA = "it had no name constraints, so trusting it vouched for any site"
		case errors.Is(err, errOtherNames):
			res.ReplacedCA = "it was made for " + strings.Join(constrainedNames(ca), ", ") + ", not " + strings.Join(hostNames(dnsNames, ips), ", ")
		case err != nil:
			res.ReplacedCA = err.Error()
		}
	}
	// One without any constraint, from a version before them, is
	// replaced: it could vouch for any site.
	if shared && errors.Is(err, errOtherNames) && ca.PermittedDNSDomainsCritical {
		return nil, fmt.Errorf("the local CA in the database was made for %s, and this server is asked to serve %s: "+
			"start every replica with the same --smtp-host", strings.Join(constrainedNames(ca), ", "), strings.Join(hostNames(dnsNames, ips), ", "))
	}
	if err != nil {
		ca, caKey, err = newCA(dnsNames, ips, now)
		if err != nil {
			return nil, err
		}
		// Key before certificate: a reader that sees the new ca.pem can
		// always find its key.
		if err := writeKey(st, CAKeyFile, caKey); err != nil {
			return nil, err
		}
		if err := writeCert(st, CAFile, ca); err != nil {
			return nil, err
		}
		res.CreatedCA = true
	}

	var leaf *x509.Certificate
	var leafKey crypto.Signer
	if !res.CreatedCA {
		leaf, leafKey, err = readPair(st, CertFile, KeyFile)
		if err == nil {
			err = checkLeaf(leaf, ca, dnsNames, ips, now)
		}
	}
	if res.CreatedCA || err != nil {
		leaf, leafKey, err = newLeaf(ca, caKey, dnsNames, ips, now)
		if err != nil {
			return nil, err
		}
		if err := writeKey(st, KeyFile, leafKey); err != nil {
			return nil, err
		}
		if err := writeCert(st, CertFile, leaf); err != nil {
			return nil, err
		}
		res.CreatedLeaf = true
	}

	res.Certificate = tls.Certificate{
		Certificate: [][]byte{leaf.Raw},
		PrivateKey:  leafKey,
		Leaf:        leaf,
	}
	return res, nil
}

// Load reads a certificate and key pair given by the user.
func Load(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read tls certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read tls key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load tls pair %s and %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// ServerConfig returns a TLS configuration serving cert.
func ServerConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
}

// CAPEM returns the PEM encoding of the CA certificate in dir.
func CAPEM(dir string) ([]byte, error) { return CAPEMIn(Dir(dir), dir) }

// CAPEMIn returns the PEM encoding of the CA certificate in st, which
// where names for people.
func CAPEMIn(st Storage, where string) ([]byte, error) {
	path := st.Path(CAFile)
	data, err := st.ReadFile(CAFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &noCAError{dir: where, err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("read ca: %w", err)
	}
	if _, err := parseCert(data); err != nil {
		return nil, fmt.Errorf("read ca %s: %w", path, err)
	}
	return data, nil
}

// noCAError keeps the short message for users while errors.Is still
// recognises fs.ErrNotExist underneath.
type noCAError struct {
	dir string
	err error
}

func (e *noCAError) Error() string {
	return "no CA yet in " + e.dir + ": run `capture serve` once"
}

func (e *noCAError) Unwrap() error { return e.err }

// checkCA says why ca cannot sign the server certificate, or nil. A CA
// that may vouch for names beyond the server's (made by an older version
// without name constraints, or for other hosts) is replaced: trusting it
// must not let it vouch for any other site.
func checkCA(ca *x509.Certificate, dnsNames []string, ips []net.IP, now time.Time) error {
	switch {
	case !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0:
		return errors.New("not a ca certificate")
	case now.Add(renewBefore).After(ca.NotAfter):
		return errors.New("ca expires soon")
	case !ca.PermittedDNSDomainsCritical || !slices.Equal(ca.PermittedDNSDomains, dnsNames) ||
		!slices.EqualFunc(ca.PermittedIPRanges, hostRanges(ips), func(a, b *net.IPNet) bool { return a.String() == b.String() }):
		return errOtherNames
	}
	return nil
}

// errOtherNames is a CA that is sound, but constrained to other names than
// the server's (or to none).
var errOtherNames = errors.New("ca not constrained to the server's names")

// constrainedNames are the names and addresses a CA may vouch for.
func constrainedNames(ca *x509.Certificate) []string {
	names := slices.Clone(ca.PermittedDNSDomains)
	for _, r := range ca.PermittedIPRanges {
		names = append(names, r.IP.String())
	}
	return names
}

func hostNames(dnsNames []string, ips []net.IP) []string {
	names := slices.Clone(dnsNames)
	for _, ip := range ips {
		names = append(names, ip.String())
	}
	return names
}

// hostRanges is each address as a range of one.
func hostRanges(ips []net.IP) []*net.IPNet {
	out := make([]*net.IPNet, len(ips))
	for i, ip := range ips {
		bits := 8 * net.IPv6len
		if v4 := ip.To4(); v4 != nil {
			ip, bits = v4, 8*net.IPv4len
		}
		out[i] = &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}
	}
	return out
}

func checkLeaf(leaf, ca *x509.Certificate, dnsNames []string, ips []net.IP, now time.Time) error {
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("not signed by the current ca: %w", err)
	}
	if now.Add(renewBefore).After(leaf.NotAfter) {
		return errors.New("certificate expires soon")
	}
	if !hasServerAuth(leaf) {
		return errors.New("certificate not for servers")
	}
	for _, name := range dnsNames {
		if !hasDNSName(leaf, name) {
			return fmt.Errorf("certificate lacks %s", name)
		}
	}
	for _, ip := range ips {
		if !hasIP(leaf, ip) {
			return fmt.Errorf("certificate lacks %s", ip)
		}
	}
	return nil
}

func hasServerAuth(c *x509.Certificate) bool {
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth {
			return true
		}
	}
	return false
}

func hasDNSName(c *x509.Certificate, name string) bool {
	for _, n := range c.DNSNames {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

func hasIP(c *x509.Certificate, ip net.IP) bool {
	for _, have := range c.IPAddresses {
		if have.Equal(ip) {
			return true
		}
	}
	return false
}

// sans returns the subject alternative names the server certificate must
// carry: the loopback names first, then hosts, without duplicates.
func sans(hosts []string) ([]string, []net.IP) {
	dnsNames := []string{"localhost"}
	seenDNS := map[string]bool{"localhost": true}
	var ips []net.IP
	seenIP := map[netip.Addr]bool{}
	addIP := func(a netip.Addr) {
		a = a.Unmap().WithZone("")
		if !seenIP[a] {
			seenIP[a] = true
			ips = append(ips, net.IP(a.AsSlice()))
		}
	}
	addIP(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	addIP(netip.IPv6Loopback())

	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
			addIP(a)
			continue
		}
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if h == "" || seenDNS[h] {
			continue
		}
		seenDNS[h] = true
		dnsNames = append(dnsNames, h)
	}
	return dnsNames, ips
}

// newCA makes a CA that can vouch for the server certificate's names only
// (RFC 5280 name constraints, marked critical so that a client that cannot
// check them rejects the CA rather than trust it for everything).
func newCA(dnsNames []string, ips []net.IP, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate ca key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notBefore := now.Add(-backdate)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   caCommonName,
			Organization: []string{"capture"},
		},
		NotBefore:             notBefore,
		NotAfter:              notBefore.AddDate(caValidityYears, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// The CA signs server certificates directly, never another CA.
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         dnsNames,
		PermittedIPRanges:           hostRanges(ips),
	}
	cert, err := create(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("create ca: %w", err)
	}
	return cert, key, nil
}

func newLeaf(ca *x509.Certificate, caKey crypto.Signer, dnsNames []string, ips []net.IP, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notBefore := now.Add(-backdate)
	notAfter := notBefore.Add(leafValidity)
	// A leaf outliving its CA would fail verification before its own expiry.
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   leafCommonName,
			Organization: []string{"capture"},
		},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
	}
	cert, err := create(tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	return cert, key, nil
}

func create(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial: %w", err)
	}
	return serial, nil
}

// readPair reads a certificate and its private key and checks they belong
// together.
func readPair(st Storage, certName, keyName string) (*x509.Certificate, crypto.Signer, error) {
	certPath, keyPath := st.Path(certName), st.Path(keyName)
	data, err := st.ReadFile(certName)
	if err != nil {
		return nil, nil, err
	}
	cert, err := parseCert(data)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", certPath, err)
	}
	data, err = st.ReadFile(keyName)
	if err != nil {
		return nil, nil, err
	}
	key, err := parseKey(data)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", keyPath, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s does not match %s", keyPath, certPath)
	}
	return cert, key, nil
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no certificate pem block")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("no private key pem block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
	return signer, nil
}

func writeCert(st Storage, name string, cert *x509.Certificate) error {
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	return st.WriteFile(name, data, false)
}

func writeKey(st Storage, name string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return st.WriteFile(name, data, true)
}

// writeFile replaces path atomically, so a concurrent reader sees either the
// old content or the new, never part of it.
func writeFile(path string, data []byte, perm fs.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// CreateTemp already uses 0600; set the final mode before any secret is
	// written and regardless of the umask.
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// DatabaseFiles is a database that keeps the PEM files (store.Store on a
// shared database).
type DatabaseFiles interface {
	TLSFile(ctx context.Context, name string) ([]byte, error)
	SetTLSFile(ctx context.Context, name string, pem []byte) error
}

// InDatabase is the Storage of a database's PEM files; notFound is the
// database's error for a file never written.
func InDatabase(ctx context.Context, db DatabaseFiles, notFound error) Storage {
	return dbStorage{ctx, db, notFound}
}

type dbStorage struct {
	ctx      context.Context
	db       DatabaseFiles
	notFound error
}

func (d dbStorage) ReadFile(name string) ([]byte, error) {
	data, err := d.db.TLSFile(d.ctx, name)
	if errors.Is(err, d.notFound) {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return data, err
}

func (d dbStorage) WriteFile(name string, data []byte, _ bool) error {
	return d.db.SetTLSFile(d.ctx, name, data)
}

func (d dbStorage) Path(name string) string { return "the database's " + name }
