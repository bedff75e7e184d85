package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/testkit"
)

func TestTokenCreateListRevoke(t *testing.T) {
	b := testkit.Broker(t, "")
	addr := b.Addrs()[0]
	// Before the catalogue: list says which command makes it; create makes
	// the one topic a token needs.
	if code, _, stderr := offerlog(t, "", "token", "list", "--brokers", addr); code != 1 || !strings.Contains(stderr, "offerlog topics ensure") {
		t.Fatalf("token list without auth.tokens: %d %s", code, stderr)
	}
	code, out, stderr := offerlog(t, "", "token", "create", "--seller", "s1", "--ttl", "1h", "--brokers", addr)
	if code != 0 || !strings.Contains(stderr, "created auth.tokens") {
		t.Fatalf("token create on a cluster without the catalogue: %d %s", code, stderr)
	}
	if code, _, stderr := offerlog(t, "", "topics", "ensure", "--brokers", addr, "--partitions", "2"); code != 0 {
		t.Fatalf("topics ensure: %d %s", code, stderr)
	}
	text := strings.TrimSpace(out)
	if !strings.HasPrefix(text, "olt_") || strings.Contains(text, "\n") {
		t.Fatalf("token create printed %q, want the token alone", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := auth.ReadAll(ctx, testkit.Cluster(t, b.Addrs()))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := store.Authenticate(text)
	if err != nil || sc.Kind != auth.Seller || sc.Subject != "s1" {
		t.Fatalf("the created token authenticates as %v, %v", sc, err)
	}
	rec, _ := store.Get(sc.TokenID)
	if strings.Contains(string(rec.Hash), text) || rec.ExpiresAt == 0 {
		t.Fatalf("record %+v: want a hash and an expiry", rec)
	}

	code, out, _ = offerlog(t, "", "token", "list", "--brokers", addr)
	if code != 0 || !strings.Contains(out, sc.TokenID) || !strings.Contains(out, "seller") || strings.Contains(out, text) {
		t.Fatalf("token list: %d\n%s", code, out)
	}
	if code, _, stderr = offerlog(t, "", "token", "revoke", sc.TokenID, "--brokers", addr); code != 0 {
		t.Fatalf("token revoke: %d %s", code, stderr)
	}
	if code, _, stderr = offerlog(t, "", "token", "revoke", sc.TokenID, "--brokers", addr); code != 1 || !strings.Contains(stderr, "already revoked") {
		t.Fatalf("a second revoke: %d %s, want exit 1 saying so", code, stderr)
	}
	store, err = auth.ReadAll(ctx, testkit.Cluster(t, b.Addrs()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Authenticate(text); err == nil {
		t.Fatal("a revoked token still authenticates")
	}
	for _, args := range [][]string{
		{"token", "create", "--brokers", addr},
		{"token", "create", "--admin", "--seller", "s1", "--brokers", addr},
		{"token", "create", "--client", "a\x01b", "--brokers", addr},
		{"token", "nosuch", "--brokers", addr},
	} {
		if code, _, stderr := offerlog(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d %s, want 2", args, code, stderr)
		}
	}
}

func TestKafkaConfigAuthenticatesTheCLI(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, Addr: "127.0.0.1:0", SASL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	props := filepath.Join(dir, broker.PropertiesFile)
	// Without credentials the broker refuses the CLI, within --timeout.
	code, _, stderr := offerlog(t, "", "consume", "--brokers", b.Addrs()[0], "--timeout", "2s", "--max", "1", "auth.tokens")
	if code != 1 {
		t.Fatalf("consume without credentials: exit %d %s, want 1", code, stderr)
	}
	// With --kafka-config (brokers from its bootstrap.servers) it works.
	if code, _, stderr := offerlog(t, "", "topics", "ensure", "--kafka-config", props, "--partitions", "1"); code != 0 {
		t.Fatalf("topics ensure --kafka-config: %d %s", code, stderr)
	}
	if code, out, stderr := offerlog(t, "", "token", "create", "--admin", "--kafka-config", props); code != 0 || !strings.HasPrefix(out, "olt_") {
		t.Fatalf("token create --kafka-config: %d %q %s", code, out, stderr)
	}
	if code, out, stderr := offerlog(t, "", "lag", "--brokers", b.Addrs()[0], "--kafka-config", props); code != 0 {
		t.Fatalf("lag --kafka-config: %d %s %s", code, out, stderr)
	}
	if code, _, stderr := offerlog(t, "", "topics", "list", "--kafka-config", filepath.Join(dir, "nosuch")); code != 2 {
		t.Fatalf("a missing --kafka-config: exit %d %s, want 2", code, stderr)
	}
}
