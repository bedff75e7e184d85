package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestKafkaStartsSecure runs Kafka's start script of the rendered
// manifests (the ConfigMap kafka, which compose mounts too) on deploy
// init's Secrets, with Kafka's own commands replaced by stubs, and reads
// the server.properties it writes: TLS on every listener, the controllers
// by mutual TLS, the ACL authorizer, and no anonymous super user; and
// without the certificate (--kafka-tls=false), SASL on every listener.
func TestKafkaStartsSecure(t *testing.T) {
	m := loadManifests(t)
	var script string
	for name, cm := range m.configMaps {
		if strings.HasPrefix(name, "kafka") {
			script = cm.Data["start.sh"]
		}
	}
	if script == "" {
		t.Fatal("the manifests hold no Kafka start.sh")
	}
	secrets := t.TempDir()
	deployInit(t, 0, "--credentials-only", "--secrets-dir", secrets)

	start := func(t *testing.T, tlsDir string) (props map[string]string, dir string) {
		dir = t.TempDir()
		bin := filepath.Join(dir, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, stub := range []string{"kafka-storage.sh", "kafka-server-start.sh"} {
			body := "#!/bin/sh\necho \"$@\" >> " + filepath.Join(dir, stub+".args") + "\n"
			if err := os.WriteFile(filepath.Join(bin, stub), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		s := strings.ReplaceAll(script, "/tmp/", dir+"/")
		s = strings.ReplaceAll(s, "/opt/kafka/bin/", bin+"/")
		cmd := exec.Command("sh", "-c", s)
		cmd.Env = append(os.Environ(), "HOSTNAME=kafka-1", "CLUSTER_ID=test", "KAFKA_EXTERNAL=localhost:19091",
			"KAFKA_PASSWORD_FILE="+filepath.Join(secrets, secretKafka, "password"), "KAFKA_TLS_DIR="+tlsDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("start.sh: %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "server.properties"))
		if err != nil {
			t.Fatal(err)
		}
		props = map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Errorf("server.properties: %q is no property", line)
			}
			if _, dup := props[k]; dup {
				t.Errorf("server.properties sets %s twice", k)
			}
			props[k] = v
		}
		if strings.Contains(string(b), "ANONYMOUS") {
			t.Errorf("server.properties names ANONYMOUS:\n%s", b)
		}
		args, err := os.ReadFile(filepath.Join(dir, "kafka-storage.sh.args"))
		if err != nil || !strings.Contains(string(args), "--add-scram SCRAM-SHA-512=[name=offerlog,password=") {
			t.Errorf("the storage is not formatted with the super user: %s %v", args, err)
		}
		return props, dir
	}
	want := func(t *testing.T, props map[string]string, kv ...string) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			if got := props[kv[i]]; got != kv[i+1] {
				t.Errorf("%s = %q, want %q", kv[i], got, kv[i+1])
			}
		}
	}

	t.Run("tls", func(t *testing.T) {
		tlsDir := filepath.Join(secrets, secretKafkaTLS)
		props, dir := start(t, tlsDir)
		want(t, props,
			"listeners", "SASL_SSL://:9092,CONTROLLER://:9093,EXTERNAL://:19091",
			"advertised.listeners", "SASL_SSL://kafka-1.kafka:9092,EXTERNAL://localhost:19091",
			"listener.security.protocol.map", "SASL_SSL:SASL_SSL,CONTROLLER:SSL,EXTERNAL:SASL_SSL",
			"inter.broker.listener.name", "SASL_SSL",
			"listener.name.controller.ssl.client.auth", "required",
			"ssl.truststore.type", "PEM", "ssl.truststore.location", filepath.Join(tlsDir, "ca.crt"),
			"ssl.keystore.type", "PEM",
			"authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"allow.everyone.if.no.acl.found", "false",
			"super.users", "User:offerlog;User:CN=kafka")
		// The key store is the key and its certificate, which the CA
		// signed for the broker's name with the principal super.users
		// names.
		ks, err := os.ReadFile(props["ssl.keystore.location"])
		if err != nil || !strings.HasPrefix(props["ssl.keystore.location"], dir) {
			t.Fatalf("key store %s: %v", props["ssl.keystore.location"], err)
		}
		pair, err := tls.X509KeyPair(ks, ks)
		if err != nil {
			t.Fatalf("key store: %v", err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		roots, err := os.ReadFile(filepath.Join(tlsDir, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(roots)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "kafka-1.kafka",
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the broker's certificate: %v", err)
		}
		// every broker the components are given (the settings' brokers)
		// is a name of the certificate
		for name, cm := range m.configMaps {
			if !strings.HasPrefix(name, "offerlog-settings") {
				continue
			}
			for _, hp := range strings.Split(cm.Data["OFFERLOG_BROKERS"], ",") {
				host, _, _ := strings.Cut(hp, ":")
				if err := leaf.VerifyHostname(host); err != nil {
					t.Errorf("the components' broker %s: %v", hp, err)
				}
			}
		}
		if leaf.Subject.String() != "CN=kafka" {
			t.Errorf("the broker's certificate is %s: the controllers' super user is User:CN=kafka", leaf.Subject)
		}
		client, err := os.ReadFile(filepath.Join(dir, "client.properties"))
		if err != nil || !strings.Contains(string(client), "security.protocol=SASL_SSL") ||
			!strings.Contains(string(client), "ssl.truststore.location="+filepath.Join(tlsDir, "ca.crt")) {
			t.Errorf("the readiness client's properties: %v\n%s", err, client)
		}
	})
	t.Run("no-tls", func(t *testing.T) {
		props, _ := start(t, filepath.Join(t.TempDir(), "none"))
		want(t, props,
			"listeners", "SASL_PLAINTEXT://:9092,CONTROLLER://:9093,EXTERNAL://:19091",
			"listener.security.protocol.map", "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
			"sasl.mechanism.controller.protocol", "PLAIN",
			"listener.name.controller.sasl.enabled.mechanisms", "PLAIN",
			"super.users", "User:offerlog")
		if slices.ContainsFunc(strings.Split(props["listener.security.protocol.map"], ","), func(l string) bool { return strings.HasSuffix(l, ":PLAINTEXT") }) {
			t.Error("a PLAINTEXT listener")
		}
	})
}
