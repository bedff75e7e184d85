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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return files, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "offerlog dev CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return files, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return files, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return files, err
	}
	srv := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "offerlog"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(2, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			srv.IPAddresses = append(srv.IPAddresses, ip)
		} else if h != "" {
			srv.DNSNames = append(srv.DNSNames, h)
		}
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &key.PublicKey, caKey)
	if err != nil {
		return files, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return files, err
	}
	for _, f := range []struct {
		path, kind string
		der        []byte
		mode       os.FileMode
	}{
		{files.CA, "CERTIFICATE", caDER, 0o644},
		{files.Cert, "CERTIFICATE", srvDER, 0o644},
		{files.Key, "EC PRIVATE KEY", keyDER, 0o600}, // last: its presence says the set is whole
	} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), f.mode); err != nil {
			return files, err
		}
	}
	return files, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
