package broker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams"
)

func TestSASLIsRequiredAndThePropertiesFileWorks(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, Addr: "127.0.0.1:0", SASL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	props := filepath.Join(dir, broker.PropertiesFile)
	st, err := os.Stat(props)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", props, st.Mode().Perm())
	}
	kc, err := streams.LoadKafkaConfig(props)
	if err != nil {
		t.Fatal(err)
	}
	creds, _ := b.Credentials()
	if kc.Credentials == nil || *kc.Credentials != creds || creds.Mechanism != "SCRAM-SHA-512" || strings.Join(kc.Brokers, ",") != b.Addrs()[0] {
		t.Fatalf("properties %+v, broker %+v at %v", kc, creds, b.Addrs())
	}

	ping := func(opts ...kgo.Opt) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}, opts...)...)
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping(); err == nil {
		t.Fatal("a client without credentials was served")
	}
	wrong := streams.Credentials{Mechanism: "SCRAM-SHA-512", User: creds.User, Password: "wrong"}
	if _, err := streams.NewCluster(b.Addrs(), &streams.Credentials{Mechanism: "SCRAM-SHA-512", User: creds.User}, streams.ClientSettings{}); err == nil {
		t.Fatal("credentials without a password were taken")
	}
	bad, err := streams.NewCluster(b.Addrs(), &wrong, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	// refused as Kafka refuses it, saying why (kfake patch 17), not by a
	// connection closed under it (EOF)
	if err := ping(bad.ConnectOptions()[1:]...); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a client with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	kafka, err := streams.NewCluster(b.Addrs(), &creds, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	cl, err := kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("a client with the credentials: %v", err)
	}
	cl.Close() // before the broker: its Close waits for connections to end

	// A restart keeps the credentials.
	addr := b.Addrs()[0]
	b.Close()
	b, err = broker.Start(broker.Config{DataDir: dir, Addr: addr, SASL: true})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := b.Credentials(); again != creds {
		t.Fatal("a restart made new credentials")
	}

	kcat := testkit.Tool(t, "kcat")
	out, err := exec.Command(kcat, "-F", props, "-L", "-m", "10").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 brokers") {
		t.Fatalf("kcat -F %s -L: %v\n%s", props, err, out)
	}
	out, err = exec.Command(kcat, "-b", b.Addrs()[0], "-L", "-m", "3").CombinedOutput()
	if err == nil {
		t.Fatalf("kcat without credentials was served:\n%s", out)
	}
}

// syncBuffer is a log's buffer that the broker's goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAUserIsRefusedWhatItsACLsDoNotAllow(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	start := func(addr string) *broker.Broker {
		b, err := broker.Start(broker.Config{DataDir: dir, Addr: addr, SASL: true, Partitions: 1,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := start("127.0.0.1:0")
	addr := b.Addrs()[0]
	creds, _ := b.Credentials()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The super user makes user alice, who may write topic "mine".
	admin, err := streams.NewCluster(b.Addrs(), &creds, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	adm := admin.Admin()
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "theirs"); err != nil {
		t.Fatal(err)
	}
	up, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"}})
	if err != nil || up.Error() != nil {
		t.Fatalf("alter SCRAM: %v %v", err, up.Error())
	}
	acl := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("mine").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}
	admin.Close()

	produce := func(topic string) error {
		alice, err := streams.NewCluster([]string{addr}, &streams.Credentials{Mechanism: "SCRAM-SHA-512", User: "alice", Password: "alice-secret"}, streams.ClientSettings{})
		if err != nil {
			t.Fatal(err)
		}
		defer alice.Close()
		cl, err := alice.Client(kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
	}
	// A listing of every topic leaves out what alice may not describe,
	// and refuses nothing: nothing is logged.
	alice, err := streams.NewCluster([]string{addr}, &streams.Credentials{Mechanism: "SCRAM-SHA-512", User: "alice", Password: "alice-secret"}, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := alice.Admin().ListTopics(ctx)
	alice.Close()
	if err != nil || !slices.Equal(listed.Names(), []string{"mine"}) {
		t.Fatalf("alice lists %v %v, want [mine]", listed.Names(), err)
	}
	if strings.Contains(logs.String(), "authorization failed") {
		t.Fatalf("a listing's filter was logged as a refusal:\n%s", logs.String())
	}
	for round := range 2 { // the users and ACLs are kept across a restart
		if err := produce("mine"); err != nil {
			t.Fatalf("round %d: alice may write mine: %v", round, err)
		}
		if err := produce("theirs"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("round %d: alice wrote theirs: %v, want TOPIC_AUTHORIZATION_FAILED", round, err)
		}
		if !regexp.MustCompile(`authorization failed: User:alice from 127.0.0.1 may not (WRITE|DESCRIBE) TOPIC \\"theirs\\"`).MatchString(logs.String()) {
			t.Fatalf("round %d: the refusal is not logged:\n%s", round, logs.String())
		}
		b.Close()
		b = start(addr)
	}
	b.Close()
}

// TestAnotherClusterIsDialledWithItsOwnCredentials: two SASL brokers, each
// with its own user (two data centres' clusters). The other cluster,
// dialled with this one's credentials, refuses them and says so
// (SASL_AUTHENTICATION_FAILED, not EOF); with its own, given as a peer
// (--peer-kafka-config), it answers.
func TestAnotherClusterIsDialledWithItsOwnCredentials(t *testing.T) {
	start := func() (*broker.Broker, streams.Credentials) {
		b, err := broker.Start(broker.Config{DataDir: t.TempDir(), Addr: "127.0.0.1:0", SASL: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		creds, _ := b.Credentials()
		return b, creds
	}
	a, credsA := start()
	b, credsB := start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ping := func(c *streams.Cluster) error {
		other, err := c.Other(b.Addrs())
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		_, err = other.Admin().ListTopics(ctx)
		return err
	}
	alone, err := streams.NewCluster(a.Addrs(), &credsA, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	if err := ping(alone); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("B dialled with A's credentials: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	withPeer, err := streams.NewCluster(a.Addrs(), &credsA, streams.ClientSettings{
		Peers: []streams.KafkaConfig{{Brokers: b.Addrs(), Credentials: &credsB}}})
	if err != nil {
		t.Fatal(err)
	}
	defer withPeer.Close()
	if err := ping(withPeer); err != nil {
		t.Errorf("B dialled with its own credentials: %v", err)
	}
}
