package broker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if err := ping(bad.ConnectOptions()[1:]...); err == nil {
		t.Fatal("a client with a wrong password was served")
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
