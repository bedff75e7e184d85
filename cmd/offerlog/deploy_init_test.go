package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/internal/zkconn"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// deployInit runs offerlog deploy init with args and returns its output,
// failing the test unless it exits with want.
func deployInit(t *testing.T, want int, args ...string) string {
	t.Helper()
	var out, errb strings.Builder
	if code := run(context.Background(), append([]string{"deploy", "init"}, args...), nil, &out, &errb); code != want {
		t.Fatalf("deploy init %v: exit %d, want %d\n%s%s", args, code, want, out.String(), errb.String())
	}
	return out.String() + errb.String()
}

// TestDeployInitMakesWhatAClusterNeeds runs the bootstrap as compose and
// the topology test do (secrets as files): the Kafka user first, a SASL
// broker that takes only that user, then the topics and the tokens; a
// second run keeps everything, and the tokens it made authenticate.
func TestDeployInitMakesWhatAClusterNeeds(t *testing.T) {
	secrets := t.TempDir()
	deployInit(t, 0, "--credentials-only", "--secrets-dir", secrets)
	props, err := os.ReadFile(filepath.Join(secrets, secretKafka, "kafka.properties"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"security.protocol=SASL_SSL", "ssl.ca.location=ca.crt", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=offerlog", "sasl.password="} {
		if !strings.Contains(string(props), want) {
			t.Errorf("kafka.properties lacks %q:\n%s", want, props)
		}
	}
	// The ZooKeeper credentials, as zkconn reads them from the file.
	t.Setenv(zkconn.AuthFileEnv, filepath.Join(secrets, secretZooKeeper, "auth"))
	if user, pw, ok, err := zkconn.Credentials(); err != nil || !ok || user != "offerlog" || len(pw) < 20 {
		t.Errorf("the ZooKeeper credentials init made: %q %q %v %v", user, pw, ok, err)
	}
	// The brokers' certificate: signed by the CA every client trusts, for
	// the names the manifests give the brokers; renewed from the same CA
	// on demand, and when it expires within renewBefore.
	tlsDir := filepath.Join(secrets, secretKafkaTLS)
	checkCertificate(t, filepath.Join(secrets, secretKafka, "ca.crt"), filepath.Join(tlsDir, "tls.crt"), "kafka-1.kafka", "localhost", "kafka-0.kafka.offerlog.svc")
	issued, _ := os.ReadFile(filepath.Join(tlsDir, "tls.crt"))
	if out := deployInit(t, 0, "--credentials-only", "--secrets-dir", secrets); !strings.Contains(out, "secret offerlog-kafka-tls: kept") {
		t.Errorf("a second init: %s", out)
	}
	if out := deployInit(t, 0, "--credentials-only", "--secrets-dir", secrets, "--renew-kafka-cert"); !strings.Contains(out, "secret offerlog-kafka-tls: renewed") {
		t.Errorf("a renewal: %s", out)
	}
	if renewed, _ := os.ReadFile(filepath.Join(tlsDir, "tls.crt")); bytes.Equal(issued, renewed) {
		t.Error("--renew-kafka-cert kept the certificate")
	}
	checkCertificate(t, filepath.Join(secrets, secretKafka, "ca.crt"), filepath.Join(tlsDir, "tls.crt"), "kafka-1.kafka")
	// One expiring within renewBefore is renewed by any init.
	caDir := filepath.Join(secrets, secretKafkaCA)
	caCert, _ := os.ReadFile(filepath.Join(caDir, "ca.crt"))
	caKey, _ := os.ReadFile(filepath.Join(caDir, "ca.key"))
	ca, err := listener.ParseAuthority(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	expiring, _, err := ca.Issue("kafka", []string{"kafka-1.kafka"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tlsDir, "tls.crt"), expiring, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := deployInit(t, 0, "--credentials-only", "--secrets-dir", secrets); !strings.Contains(out, "secret offerlog-kafka-tls: renewed") {
		t.Errorf("an init with a certificate expiring tomorrow: %s", out)
	}
	checkCertificate(t, filepath.Join(secrets, secretKafka, "ca.crt"), filepath.Join(tlsDir, "tls.crt"), "kafka-1.kafka")
	// The broker is given the user and the certificate init made (as
	// Kafka's pods are).
	data := startBrokerOf(t, secrets)
	b, err := broker.Start(broker.Config{DataDir: data, Addr: "127.0.0.1:0", Partitions: 2, SASL: true, Logger: testkit.Logger(),
		TLS: serverTLS(t, tlsDir), CAFile: filepath.Join(tlsDir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	brokers := strings.Join(b.Addrs(), ",")

	first := deployInit(t, 0, "--secrets-dir", secrets, "--brokers", brokers, "--partitions", "2")
	for _, want := range []string{"secret offerlog-kafka: kept", "topics ok", "secret offerlog-tokens: created", "(admin, admin): registered", "(cache, reader): registered",
		"secret offerlog-kafka-registry: created; user offerlog-registry,", "secret offerlog-kafka-api: created; user offerlog-api,"} {
		if !strings.Contains(first, want) {
			t.Errorf("first init does not say %q:\n%s", want, first)
		}
	}
	// An ACL the registry's spec does not declare (a spec narrowed by an
	// upgrade, or one given by hand) is removed by the next init.
	creds, _ := b.Credentials()
	kafka, err := streams.NewCluster(b.Addrs(), &creds, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	extra := kadm.NewACLs().Allow("User:offerlog-registry").AllowHosts().Topics(topics.OffersCommands).Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := kafka.Admin().CreateACLs(testkit.Context(t, 10*time.Second), extra); err != nil || res[0].Err != nil {
		t.Fatalf("create an ACL: %v %v", err, res)
	}
	second := deployInit(t, 0, "--secrets-dir", secrets, "--brokers", brokers, "--partitions", "2")
	for _, want := range []string{"secret offerlog-tokens: kept", "(admin): registered already", "(cache): registered already",
		"user offerlog-registry, ", " ACLs, 1 it no longer declares removed"} {
		if !strings.Contains(second, want) {
			t.Errorf("second init does not say %q:\n%s", want, second)
		}
	}
	store, err := auth.ReadAll(testkit.Context(t, 30*time.Second), kafka)
	if err != nil {
		t.Fatal(err)
	}
	for key, kind := range map[string]auth.Kind{"admin": auth.Admin, "cache": auth.Reader} {
		text, err := os.ReadFile(filepath.Join(secrets, secretTokens, key))
		if err != nil {
			t.Fatal(err)
		}
		scope, err := store.Authenticate(string(text))
		if err != nil || scope.Kind != kind {
			t.Errorf("the %s token init made: %v %v, want a %s token", key, scope, err, kind)
		}
	}
	if n := len(store.List()); n != 2 {
		t.Errorf("auth.tokens holds %d tokens after two inits, want 2", n)
	}
	checkComponentUsers(t, secrets, b.Addrs())
}

// startBrokerOf returns the data directory of a broker given the super
// user deploy init made (its kafka.properties and the CA it names).
func startBrokerOf(t *testing.T, secrets string) string {
	t.Helper()
	data := t.TempDir()
	for _, f := range []string{broker.PropertiesFile, "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(secrets, secretKafka, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// serverTLS is the broker's TLS of the Secret offerlog-kafka-tls in dir.
func serverTLS(t *testing.T, dir string) *tls.Config {
	t.Helper()
	c, err := listener.ServerTLS(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkCertificate fails unless the PEM certificate cert is signed by ca
// for each of hosts.
func checkCertificate(t *testing.T, ca, cert string, hosts ...string) {
	t.Helper()
	roots, err := streams.ClientTLS(ca)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", cert)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots.RootCAs, DNSName: h}); err != nil {
			t.Errorf("%s for %s: %v", cert, h, err)
		}
	}
}

// checkComponentUsers logs in as each component's user, from the
// kafka.properties of its Secret, and writes a record to every topic of
// the catalogue: the broker takes those its spec declares writing and
// refuses the others (TOPIC_AUTHORIZATION_FAILED). It writes into every
// topic: call it last.
func checkComponentUsers(t *testing.T, secrets string, brokers []string) {
	ctx := testkit.Context(t, 2*time.Minute)
	catalogue := topics.Names(topics.Catalogue(2))
	for _, name := range platform.AllComponents() {
		kc, err := streams.LoadKafkaConfig(filepath.Join(secrets, componentSecret(name), "kafka.properties"))
		if err != nil {
			t.Fatal(err)
		}
		if kc.Credentials == nil || kc.Credentials.User != "offerlog-"+name || kc.Credentials.TLS == nil {
			t.Fatalf("%s: credentials %+v", name, kc.Credentials)
		}
		c, err := streams.NewCluster(brokers, kc.Credentials, streams.ClientSettings{})
		if err != nil {
			t.Fatal(err)
		}
		// Not idempotent: a user that writes nothing may not start a
		// producer id (IdempotentWrite), and each topic is answered alone.
		cl, err := c.Client(kgo.RecordRetries(2), kgo.DisableIdempotentWrite())
		if err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for _, topic := range catalogue {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")})
		}
		results := cl.ProduceSync(ctx, recs...)
		specs := platform.UserSpecs(name)
		for _, r := range results {
			_, writes := component.Declares(specs, r.Record.Topic)
			switch {
			case writes && r.Err != nil:
				t.Errorf("%s may not write %s, which it declares: %v", name, r.Record.Topic, r.Err)
			case !writes && !errors.Is(r.Err, kerr.TopicAuthorizationFailed):
				t.Errorf("%s wrote %s, which it does not declare: %v", name, r.Record.Topic, r.Err)
			}
		}
		cl.Close()
		c.Close()
	}
}

// TestDeployInitKeepsSecretsInKubernetes runs the bootstrap's Kubernetes
// side against an API server on a real TLS socket that keeps Secrets as the
// API does (404, 201, 409), with the pod's service account files: the
// Secret is made once, read back after, and the bearer token is sent.
func TestDeployInitKeepsSecretsInKubernetes(t *testing.T) {
	var mu sync.Mutex
	secrets := map[string]json.RawMessage{}
	var posts int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sa-token" {
			http.Error(w, `{"kind":"Status","code":401}`, http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		const base = "/api/v1/namespaces/offerlog/secrets"
		switch {
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, base+"/"):
			s, ok := secrets[strings.TrimPrefix(r.URL.Path, base+"/")]
			if !ok {
				http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
				return
			}
			w.Write(s)
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, base+"/"):
			name := strings.TrimPrefix(r.URL.Path, base+"/")
			if _, ok := secrets[name]; !ok {
				http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
				return
			}
			body, _ := io.ReadAll(r.Body)
			secrets[name] = body
			w.Write(body)
		case r.Method == http.MethodPost && r.URL.Path == base:
			body, _ := io.ReadAll(r.Body)
			var s kubeSecret
			if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Secret" || s.Metadata.Name == "" {
				http.Error(w, `{"kind":"Status","code":400}`, http.StatusBadRequest)
				return
			}
			if _, ok := secrets[s.Metadata.Name]; ok {
				http.Error(w, `{"kind":"Status","code":409}`, http.StatusConflict)
				return
			}
			posts++
			secrets[s.Metadata.Name] = body
			w.WriteHeader(http.StatusCreated)
			w.Write(body)
		default:
			http.Error(w, `{"kind":"Status","code":405}`, http.StatusMethodNotAllowed)
		}
	}))
	defer srv.Close()
	sa := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(sa, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sa, "token"), []byte("sa-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OFFERLOG_KUBE_API", srv.URL)
	t.Setenv("OFFERLOG_KUBE_DIR", sa)
	if out := deployInit(t, 0, "--credentials-only", "--namespace", "offerlog"); !strings.Contains(out, "secret offerlog-kafka: created") {
		t.Errorf("first init: %s", out)
	}
	if out := deployInit(t, 0, "--credentials-only", "--namespace", "offerlog"); !strings.Contains(out, "secret offerlog-kafka: kept") {
		t.Errorf("second init: %s", out)
	}
	var s kubeSecret
	if err := json.Unmarshal(secrets[secretKafka], &s); err != nil {
		t.Fatal(err)
	}
	var zk kubeSecret
	if err := json.Unmarshal(secrets[secretZooKeeper], &zk); err != nil {
		t.Fatal(err)
	}
	if user, pw, ok := strings.Cut(string(zk.Data["auth"]), ":"); !ok || user != "offerlog" || len(pw) < 20 {
		t.Errorf("secret %s: auth %q, want offerlog:PASSWORD", secretZooKeeper, zk.Data["auth"])
	}
	if posts != 4 || len(secrets[secretKafkaTLS]) == 0 || len(secrets[secretKafkaCA]) == 0 || string(s.Data["username"]) != "offerlog" || len(s.Data["password"]) < 20 ||
		!strings.Contains(string(s.Data["kafka.properties"]), "sasl.password="+string(s.Data["password"])) {
		t.Errorf("posts %d, secret %+v", posts, s)
	}
	// The brokers' certificate renewed: the Secret updated, the CA kept.
	var before, after kubeSecret
	if err := json.Unmarshal(secrets[secretKafkaTLS], &before); err != nil {
		t.Fatal(err)
	}
	if out := deployInit(t, 0, "--credentials-only", "--namespace", "offerlog", "--renew-kafka-cert"); !strings.Contains(out, "secret offerlog-kafka-tls: renewed") {
		t.Errorf("a renewal: %s", out)
	}
	if err := json.Unmarshal(secrets[secretKafkaTLS], &after); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before.Data["tls.crt"], after.Data["tls.crt"]) || !bytes.Equal(before.Data["ca.crt"], after.Data["ca.crt"]) {
		t.Error("the renewal did not issue a new certificate of the same CA")
	}
	// A wrong service account token is an error that says so.
	if err := os.WriteFile(filepath.Join(sa, "token"), []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := deployInit(t, 1, "--credentials-only", "--namespace", "offerlog"); !strings.Contains(out, "401") {
		t.Errorf("a refused service account: %s", out)
	}
}

// TestDeployInitWithoutTLS: --kafka-tls=false makes no CA or certificate,
// and the users' properties are SASL_PLAINTEXT, for a network the
// operator trusts (start.sh then puts the listeners on SASL_PLAINTEXT).
func TestDeployInitWithoutTLS(t *testing.T) {
	secrets := t.TempDir()
	deployInit(t, 0, "--credentials-only", "--kafka-tls=false", "--secrets-dir", secrets)
	for _, s := range []string{secretKafkaCA, secretKafkaTLS} {
		if _, err := os.Stat(filepath.Join(secrets, s)); err == nil {
			t.Errorf("secret %s made without TLS", s)
		}
	}
	props, err := os.ReadFile(filepath.Join(secrets, secretKafka, "kafka.properties"))
	if err != nil || !strings.Contains(string(props), "security.protocol=SASL_PLAINTEXT") || strings.Contains(string(props), "ssl.") {
		t.Errorf("kafka.properties without TLS: %v\n%s", err, props)
	}
	if _, err := streams.LoadKafkaConfig(filepath.Join(secrets, secretKafka, "kafka.properties")); err != nil {
		t.Error(err)
	}
}
