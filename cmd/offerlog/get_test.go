package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// TestGetWaitsForAShardOwner: get waits up to its --timeout for a cache
// server that is still starting (it gave up after 0.6 s whatever the
// timeout), and answers once the server holds its shard.
func TestGetWaitsForAShardOwner(t *testing.T) {
	b := testkit.Broker(t, "")
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "tbl", Partitions: 1, Compacted: true}})
	testkit.Put(t, b.Addrs(), "tbl", []byte("k1"), []byte("v1"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the server comes up on it later

	type result struct {
		code        int
		out, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, stderr := offerlog(t, "", "get", "--hosts", addr, "--table", "tbl", "--timeout", "60s", "k1")
		done <- result{code, out, stderr}
	}()
	time.Sleep(2 * time.Second) // the server is late on purpose: get must outwait it
	srv, err := serving.NewServer(serving.ServerConfig{Cluster: testkit.Cluster(t, b.Addrs()), Table: "tbl", Shards: 1, DC: "dc1", Host: "h1",
		Owner: serving.Static{Shard: 0}, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	r := <-done
	if r.code != 0 || !strings.Contains(r.out, "k1\t") || !strings.Contains(r.out, "djE=") { // base64 of v1
		t.Fatalf("get: %d %q %s", r.code, r.out, r.stderr)
	}
}

// TestGetNamesTheShardNobodyHolds: with one server of a table's two
// shards, get of a key of the other shard fails saying which partition
// nobody holds and what the server known holds, not only that its time ran
// out.
func TestGetNamesTheShardNobodyHolds(t *testing.T) {
	b := testkit.Broker(t, "")
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "tbl2", Partitions: 2, Compacted: true}})
	addr := serveShard(t, b.Addrs(), "tbl2", 2)
	key, other := "", ""
	for i := 0; key == "" || other == ""; i++ {
		if k := fmt.Sprint("k", i); streams.Partition(k, 2) == 1 {
			key = k
		} else {
			other = k
		}
	}
	// The server holds its shard: a key of it is answered (none).
	if code, out, stderr := offerlog(t, "", "get", "--hosts", addr, "--table", "tbl2", "--timeout", "60s", other); code != 0 ||
		!strings.Contains(out, other+"\tnull") {
		t.Fatalf("get of a key of the shard held: %d %q %s", code, out, stderr)
	}
	code, _, stderr := offerlog(t, "", "get", "--hosts", addr, "--table", "tbl2", "--timeout", "10s", key)
	if code != 1 || !strings.Contains(stderr, "no server holds the shard") || !strings.Contains(stderr, "(partition 1 of 2)") ||
		!strings.Contains(stderr, "partitions [0, 1)") {
		t.Fatalf("get of a key of a shard nobody holds: %d %s", code, stderr)
	}
}

// TestGetSaysWhichCAItTrusts: a CA that offerlog dev --tls left in the
// data directory turns TLS on, and get says so; --tls-ca "" turns it off
// (it could not be: get spoke TLS to a plaintext server and said only
// that no server held the shard).
func TestGetSaysWhichCAItTrusts(t *testing.T) {
	b := testkit.Broker(t, "")
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "tbl", Partitions: 1, Compacted: true}})
	testkit.Put(t, b.Addrs(), "tbl", []byte("k1"), []byte("v1"))
	addr := serveShard(t, b.Addrs(), "tbl", 1)
	data := t.TempDir()
	files, err := listener.GenerateTLS(filepath.Join(data, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"get", "--data", data, "--token", "x", "--hosts", addr, "--table", "tbl", "--timeout", "3s", "k1"}
	code, out, stderr := offerlog(t, "", args...)
	if code == 0 || !strings.Contains(stderr, "TLS: trusting "+files.CA) {
		t.Errorf("get with a CA left in the data directory, against a plaintext server: %d %q, want a failure that says it trusts %s:\n%s",
			code, out, files.CA, stderr)
	}
	code, out, stderr = offerlog(t, "", append([]string{"get", "--tls-ca", ""}, args[1:]...)...)
	if code != 0 || !strings.Contains(out, "k1\t") || strings.Contains(stderr, "TLS: trusting") {
		t.Errorf("get --tls-ca \"\": %d %q\n%s", code, out, stderr)
	}
}

// serveShard serves shard 0 of table's shards on a real socket until the
// test ends, and returns its address.
func serveShard(t *testing.T, brokers []string, table string, shards int) string {
	t.Helper()
	srv, err := serving.NewServer(serving.ServerConfig{Cluster: testkit.Cluster(t, brokers), Table: table, Shards: shards, DC: "dc1", Host: "h1",
		Owner: serving.Static{Shard: 0}, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return testkit.Serve(t, srv.Serve)
}
