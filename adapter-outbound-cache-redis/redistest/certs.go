package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// certValidity is how long a certificate issued without explicit times
// stays valid: long enough for any test and beyond the two weeks in which
// `tlbctl check` flags an expiring server certificate; still throw-away.
const certValidity = 90 * 24 * time.Hour

// caBackdate is how far back a CA's validity starts, so that a leaf issued
// already expired (for a test) still lies inside its CA's validity.
const caBackdate = 30 * 24 * time.Hour

// CA is a throw-away certificate authority generated for one test: an ECDSA
// P-256 key and a self-signed CA certificate, written as PEM into
// t.TempDir(). Nothing of it is committed or reused across tests.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// CertFile is the PEM file of Cert (a redis tls-ca-cert-file, or an
	// APP_*_TLS_CA_FILE).
	CertFile string

	key    *ecdsa.PrivateKey
	dir    string
	serial atomic.Int64
}

// CertPair is an issued certificate with its key, in memory and as PEM files.
type CertPair struct {
	// Cert is the leaf certificate.
	Cert *x509.Certificate
	// TLS is Cert with its key, for tls.Config.Certificates.
	TLS tls.Certificate
	// CertFile and KeyFile are the PEM files of the certificate and of its
	// key (PKCS#8).
	CertFile string
	KeyFile  string
}

// CertOptions describes a certificate [CA.Issue] creates. The zero value is
// a client certificate valid from an hour ago for certValidity.
type CertOptions struct {
	// DNSNames and IPs are the subject alternative names.
	DNSNames []string
	IPs      []net.IP
	// NotBefore and NotAfter bound validity; zero means an hour ago and
	// NotBefore plus certValidity.
	NotBefore, NotAfter time.Time
	// Server makes it a server certificate (ExtKeyUsageServerAuth);
	// otherwise it is a client certificate (ExtKeyUsageClientAuth).
	Server bool
}

// NewCA generates a CA for t; its files live in t.TempDir(). It fails t
// on any error.
func NewCA(t testing.TB) *CA {
	t.Helper()
	ca, err := newCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func newCA(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("redistest: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA", Organization: []string{"redistest"}},
		NotBefore:             now.Add(-caBackdate), // covers certificates issued expired on purpose
		NotAfter:              now.Add(certValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("redistest: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("redistest: parse CA certificate: %w", err)
	}
	ca := &CA{Cert: cert, key: key, dir: dir, CertFile: filepath.Join(dir, "ca.pem")}
	ca.serial.Store(1)
	if err := writePEM(ca.CertFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return ca, nil
}

// Pool returns a certificate pool holding only the CA certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue creates a certificate signed by the CA and writes it as
// <name>.pem and <name>-key.pem next to the CA's files. It fails t on any
// error; name must be a plain file-name stem.
func (ca *CA) Issue(t testing.TB, name string, o CertOptions) *CertPair {
	t.Helper()
	cp, err := ca.issue(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func (ca *CA) issue(name string, o CertOptions) (*CertPair, error) {
	if name == "" || filepath.Base(name) != name {
		return nil, fmt.Errorf("redistest: issue: invalid certificate name %q", name)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("redistest: issue %s: key: %w", name, err)
	}
	notBefore, notAfter := o.NotBefore, o.NotAfter
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	if notAfter.IsZero() {
		notAfter = notBefore.Add(certValidity)
	}
	usage := x509.ExtKeyUsageClientAuth
	if o.Server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"redistest"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("redistest: issue %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("redistest: issue %s: parse: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("redistest: issue %s: marshal key: %w", name, err)
	}
	cp := &CertPair{
		Cert:     cert,
		TLS:      tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
		CertFile: filepath.Join(ca.dir, name+".pem"),
		KeyFile:  filepath.Join(ca.dir, name+"-key.pem"),
	}
	if err := writePEM(cp.CertFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writePEM(cp.KeyFile, "PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	return cp, nil
}

// writePEM writes one PEM block to path, readable by the owner only.
func writePEM(path, blockType string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("redistest: write %s: %w", path, err)
	}
	return nil
}
