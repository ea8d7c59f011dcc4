package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// MaxDays bounds a certificate's lifetime.
const MaxDays = 100 * 365

// Default lifetimes, in days: a CA lasts ten years, a certificate one.
const (
	DefaultCADays   = 10 * 365
	DefaultCertDays = 365
)

// clockSkew backdates NotBefore so a member whose clock is a little behind
// accepts a fresh certificate.
const clockSkew = 5 * time.Minute

// CA is a certificate authority that signs certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Issued is a PEM certificate and its PEM private key.
type Issued struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a self-signed ECDSA P-256 CA named name (its subject's
// CommonName) valid for days from now.
func NewCA(name string, days int, now time.Time) (*CA, Issued, error) {
	if name == "" || len(name) > MaxNameLen {
		return nil, Issued{}, fmt.Errorf("CA name %q: want 1 to %d characters", name, MaxNameLen)
	}
	if days <= 0 || days > MaxDays {
		return nil, Issued{}, fmt.Errorf("days %d: want 1 to %d", days, MaxDays)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, Issued{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, Issued{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Logbook"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.AddDate(0, 0, days),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, Issued{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, Issued{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, Issued{}, err
	}
	return &CA{Cert: cert, Key: key}, Issued{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// Request is what a new certificate names.
type Request struct {
	Name string // member id or user name: the subject's CommonName
	Role Role   // the subject's OrganizationalUnit
	DNS  []string
	IPs  []net.IP
	Days int
}

// Issue signs a new ECDSA P-256 certificate for req. A coordinator or node
// certificate with no DNS name or IP address gets the name itself,
// "localhost", 127.0.0.1 and ::1, so a local cluster and a compose network
// whose host names are the member ids work without flags. It never
// outlives the CA.
func (ca *CA) Issue(req Request, now time.Time) (Issued, error) {
	if err := ValidateName(req.Name); err != nil {
		return Issued{}, err
	}
	if _, err := ParseRole(string(req.Role)); err != nil {
		return Issued{}, err
	}
	if req.Days <= 0 || req.Days > MaxDays {
		return Issued{}, fmt.Errorf("days %d: want 1 to %d", req.Days, MaxDays)
	}
	if len(req.DNS)+len(req.IPs) > 64 {
		return Issued{}, errors.New("at most 64 DNS names and IP addresses")
	}
	for _, d := range req.DNS {
		if d == "" || len(d) > 253 {
			return Issued{}, fmt.Errorf("DNS name %q: want 1 to 253 characters", d)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return Issued{}, err
	}
	notAfter := now.AddDate(0, 0, req.Days)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: req.Name, OrganizationalUnit: []string{string(req.Role)}, Organization: []string{"Logbook"}},
		NotBefore:      now.Add(-clockSkew),
		NotAfter:       notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		SubjectKeyId:   keyID(&key.PublicKey),
		AuthorityKeyId: ca.Cert.SubjectKeyId,
		DNSNames:       req.DNS,
		IPAddresses:    req.IPs,
	}
	if req.Role != RoleClient {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		if len(req.DNS) == 0 && len(req.IPs) == 0 {
			tmpl.DNSNames = []string{req.Name, "localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Issued{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return Issued{}, err
	}
	return Issued{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// ParseCA reads a CA from its PEM certificate and PEM private key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return nil, err
	}
	c := certs[0]
	if !c.IsCA {
		return nil, fmt.Errorf("pki: certificate %q is not a CA", c.Subject)
	}
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("pki: CA key: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		if ek, err2 := x509.ParseECPrivateKey(b.Bytes); err2 == nil {
			k = ek
		} else {
			return nil, fmt.Errorf("pki: CA key: %w", err)
		}
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("pki: CA key cannot sign")
	}
	if !publicKeysEqual(signer.Public(), c.PublicKey) {
		return nil, errors.New("pki: the CA key does not match the CA certificate")
	}
	return &CA{Cert: c, Key: signer}, nil
}

// ParseCerts parses every CERTIFICATE block of a PEM bundle (at least one).
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("pki: no PEM CERTIFICATE block")
	}
	return out, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	x, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && x.Equal(b)
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	h := sha256.Sum256(b)
	return h[:20]
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
