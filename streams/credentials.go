package streams

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Credentials are how the clients of a cluster connect: SASL, TLS or
// both.
type Credentials struct {
	// Mechanism is SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN; empty for no
	// SASL (TLS only).
	Mechanism      string
	User, Password string
	// TLS, if set, connects over TLS with this configuration; CAFile is
	// the PEM file its roots came from (for properties files).
	TLS    *tls.Config
	CAFile string
}

func (c Credentials) sasl() bool { return c.Mechanism != "" }

// Mechanisms are the SASL mechanisms Credentials take.
var Mechanisms = []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}

func (c Credentials) validate() error {
	switch {
	case !c.sasl() && c.TLS != nil:
		return nil
	case c.User == "" || c.Password == "":
		return errors.New("SASL: a user and a password are required")
	case c.Mechanism != "SCRAM-SHA-512" && c.Mechanism != "SCRAM-SHA-256" && c.Mechanism != "PLAIN":
		return fmt.Errorf("SASL mechanism %q: want one of %v", c.Mechanism, Mechanisms)
	}
	return nil
}

func (c Credentials) mechanism() sasl.Mechanism {
	switch c.Mechanism {
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.User, Pass: c.Password}.AsSha256Mechanism()
	case "PLAIN":
		return plain.Auth{User: c.User, Pass: c.Password}.AsMechanism()
	}
	return scram.Auth{User: c.User, Pass: c.Password}.AsSha512Mechanism()
}

// KafkaConfig is what a librdkafka properties file (kcat -F FILE) says of
// a cluster: its brokers and how to authenticate.
type KafkaConfig struct {
	Brokers     []string
	Credentials *Credentials
}

// LoadKafkaConfig reads a librdkafka properties file: bootstrap.servers
// (or metadata.broker.list), security.protocol (PLAINTEXT or
// SASL_PLAINTEXT), sasl.mechanisms, sasl.username and sasl.password. Other
// properties are refused, so that a setting offerlog would ignore (TLS) is
// never silently dropped.
func LoadKafkaConfig(path string) (KafkaConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return KafkaConfig{}, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return KafkaConfig{}, fmt.Errorf("%s:%d: want key=value", path, n)
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return KafkaConfig{}, err
	}
	var kc KafkaConfig
	for k, v := range props {
		switch k {
		case "bootstrap.servers", "metadata.broker.list":
			for _, b := range strings.Split(v, ",") {
				if b = strings.TrimSpace(b); b != "" {
					kc.Brokers = append(kc.Brokers, b)
				}
			}
		case "security.protocol", "sasl.mechanisms", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location":
		default:
			return KafkaConfig{}, fmt.Errorf("%s: property %q is not supported (bootstrap.servers, security.protocol, sasl.mechanisms, sasl.username, sasl.password, ssl.ca.location)", path, k)
		}
	}
	proto := strings.ToUpper(props["security.protocol"])
	var c Credentials
	switch proto {
	case "", "PLAINTEXT":
		return kc, nil
	case "SSL", "SASL_SSL":
		c.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if ca := props["ssl.ca.location"]; ca != "" {
			if !filepath.IsAbs(ca) {
				ca = filepath.Join(filepath.Dir(path), ca)
			}
			t, err := ClientTLS(ca)
			if err != nil {
				return KafkaConfig{}, fmt.Errorf("%s: ssl.ca.location: %w", path, err)
			}
			c.TLS, c.CAFile = t, ca
		}
	case "SASL_PLAINTEXT":
	default:
		return KafkaConfig{}, fmt.Errorf("%s: security.protocol %q: want PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL", path, proto)
	}
	if strings.HasPrefix(proto, "SASL_") {
		mech := props["sasl.mechanisms"]
		if mech == "" {
			mech = props["sasl.mechanism"]
		}
		c.Mechanism, c.User, c.Password = strings.ToUpper(mech), props["sasl.username"], props["sasl.password"]
	}
	if err := c.validate(); err != nil {
		return KafkaConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	kc.Credentials = &c
	return kc, nil
}

// WriteKafkaConfig writes a librdkafka properties file (mode 0600) for
// brokers and c, which kcat -F and offerlog's --kafka-config read.
func WriteKafkaConfig(path string, brokers []string, c Credentials) error {
	proto := map[[2]bool]string{{true, false}: "SASL_PLAINTEXT", {true, true}: "SASL_SSL", {false, true}: "SSL", {false, false}: "PLAINTEXT"}[[2]bool{c.sasl(), c.TLS != nil}]
	body := fmt.Sprintf("# offerlog: the embedded broker's address and credentials (kcat -F %s -L)\nbootstrap.servers=%s\nsecurity.protocol=%s\n",
		path, strings.Join(brokers, ","), proto)
	if c.sasl() {
		body += fmt.Sprintf("sasl.mechanisms=%s\nsasl.username=%s\nsasl.password=%s\n", c.Mechanism, c.User, c.Password)
	}
	if c.CAFile != "" {
		ca, err := filepath.Abs(c.CAFile)
		if err != nil {
			return err
		}
		body += "ssl.ca.location=" + ca + "\n"
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ClientTLS returns the TLS configuration of a client that trusts the
// certificates of the PEM file ca (a CA, or a self-signed server
// certificate).
func ClientTLS(ca string) (*tls.Config, error) {
	b, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c, err := ClientTLSOf(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ca, err)
	}
	return c, nil
}

// ClientTLSOf is ClientTLS of the CA's PEM certificates themselves.
func ClientTLSOf(ca []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("tls: no PEM certificate")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
