package listener

import (
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
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the PEM files of a server's TLS: its certificate and key,
// and the CA that signed it (what clients trust).
type TLSFiles struct {
	Cert, Key, CA string
}

// ServerTLS returns the TLS configuration of a server with the
// certificate and key of files.
func ServerTLS(cert, key string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// GenerateTLS writes, under dir, a CA and a server certificate it signs
// for hosts (and localhost, 127.0.0.1, ::1), unless they are there
// already: ca.pem, server.pem and server-key.pem (the keys mode 0600).
// For offerlog dev --tls; a real deployment brings its own.
func GenerateTLS(dir string, hosts ...string) (TLSFiles, error) {
	files := TLSFiles{Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	if _, err := os.Stat(files.Key); err == nil {
		return files, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return files, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return files, err
	}
	ca, err := NewAuthority("offerlog dev CA")
	if err != nil {
		return files, err
	}
	cert, key, err := ca.Issue("offerlog", append([]string{"localhost", "127.0.0.1", "::1"}, hosts...), 2*365*24*time.Hour)
	if err != nil {
		return files, err
	}
	for _, f := range []struct {
		path string
		pem  []byte
		mode os.FileMode
	}{
		{files.CA, ca.CertPEM, 0o644},
		{files.Cert, cert, 0o644},
		{files.Key, key, 0o600}, // last: its presence says the set is whole
	} {
		if err := os.WriteFile(f.path, f.pem, f.mode); err != nil {
			return files, err
		}
	}
	return files, nil
}

// Authority is a certificate authority of offerlog's own: offerlog dev
// --tls's, and the Kafka cluster's that offerlog deploy init makes.
type Authority struct {
	// CertPEM and KeyPEM are its certificate and key (PKCS #8), PEM.
	CertPEM, KeyPEM []byte
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
}

// NewAuthority makes a CA named name, valid ten years.
func NewAuthority(name string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return ParseAuthority(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// ParseAuthority reads a CA that NewAuthority made (to issue again).
func ParseAuthority(certPEM, keyPEM []byte) (*Authority, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls: the authority: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("tls: the authority's key is not ECDSA")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls: the authority: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("tls: the authority's certificate is not a CA's")
	}
	return &Authority{CertPEM: certPEM, KeyPEM: keyPEM, cert: cert, key: key}, nil
}

// Issue returns a certificate and its key (PKCS #8, as Kafka's PEM key
// stores read it), PEM, named cn, for hosts (DNS names, "*.x" wildcards
// or IP addresses), valid for, usable by a server and as a client's (a
// Kafka broker is both to its controllers).
func (a *Authority) Issue(cn string, hosts []string, valid time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(valid),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// NotAfter returns when the PEM certificate certPEM expires.
func NotAfter(certPEM []byte) (time.Time, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return time.Time{}, errors.New("tls: no PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("tls: %w", err)
	}
	return c.NotAfter, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
