package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/internal/zkconn"
	"github.com/offerlog/offerlog/streams"
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
	for _, want := range []string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=offerlog", "sasl.password="} {
		if !strings.Contains(string(props), want) {
			t.Errorf("kafka.properties lacks %q:\n%s", want, props)
		}
	}
	// The ZooKeeper credentials, as zkconn reads them from the file.
	t.Setenv(zkconn.AuthFileEnv, filepath.Join(secrets, secretZooKeeper, "auth"))
	if user, pw, ok, err := zkconn.Credentials(); err != nil || !ok || user != "offerlog" || len(pw) < 20 {
		t.Errorf("the ZooKeeper credentials init made: %q %q %v %v", user, pw, ok, err)
	}
	// The broker is given the user init made (as Kafka's pods are).
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, broker.PropertiesFile), props, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Config{DataDir: data, Addr: "127.0.0.1:0", Partitions: 2, SASL: true, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	brokers := strings.Join(b.Addrs(), ",")

	first := deployInit(t, 0, "--secrets-dir", secrets, "--brokers", brokers, "--partitions", "2")
	for _, want := range []string{"secret offerlog-kafka: kept", "topics ok", "secret offerlog-tokens: created", "(admin): registered", "(cache): registered"} {
		if !strings.Contains(first, want) {
			t.Errorf("first init does not say %q:\n%s", want, first)
		}
	}
	second := deployInit(t, 0, "--secrets-dir", secrets, "--brokers", brokers, "--partitions", "2")
	for _, want := range []string{"secret offerlog-tokens: kept", "(admin): registered already", "(cache): registered already"} {
		if !strings.Contains(second, want) {
			t.Errorf("second init does not say %q:\n%s", want, second)
		}
	}
	creds, _ := b.Credentials()
	kafka, err := streams.NewCluster(b.Addrs(), &creds, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	store, err := auth.ReadAll(testkit.Context(t, 30*time.Second), kafka)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"admin", "cache"} {
		text, err := os.ReadFile(filepath.Join(secrets, secretTokens, key))
		if err != nil {
			t.Fatal(err)
		}
		scope, err := store.Authenticate(string(text))
		if err != nil || scope.Kind != auth.Admin {
			t.Errorf("the %s token init made: %v %v", key, scope, err)
		}
	}
	if n := len(store.List()); n != 2 {
		t.Errorf("auth.tokens holds %d tokens after two inits, want 2", n)
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
	if posts != 2 || string(s.Data["username"]) != "offerlog" || len(s.Data["password"]) < 20 ||
		!strings.Contains(string(s.Data["kafka.properties"]), "sasl.password="+string(s.Data["password"])) {
		t.Errorf("posts %d, secret %+v", posts, s)
	}
	// A wrong service account token is an error that says so.
	if err := os.WriteFile(filepath.Join(sa, "token"), []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := deployInit(t, 1, "--credentials-only", "--namespace", "offerlog"); !strings.Contains(out, "401") {
		t.Errorf("a refused service account: %s", out)
	}
}
