package serving_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// TestMuxOfTwoTablesAndGetAfter serves two tables that hold the same key
// from one address (serving.Mux). A client of one table reads that table's
// value; a client of a table served nowhere finds no shard. GetAfter with
// an offset beyond the table's end answers only once the shard holds the
// record written there.
func TestMuxOfTwoTablesAndGetAfter(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	tables := []string{"cache.one", "cache.two"}
	cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	write := func(table, value string) {
		t.Helper()
		if err := cl.ProduceSync(testkit.Context(t, 30*time.Second), &kgo.Record{Topic: table, Key: []byte("k"), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var servers []*serving.Server
	for _, name := range tables {
		testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: name, Partitions: 4, Compacted: true}})
		write(name, name)
		srv, err := serving.NewServer(serving.ServerConfig{Cluster: testkit.Cluster(t, brokers), Table: name, Shards: 1, DC: "dc1", Host: "h",
			Owner: serving.Static{Shard: 0}, Logger: testkit.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, srv)
	}
	mux := serving.NewMux(servers...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mux.Serve(ctx, ln, grpc.NewServer()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mux: %v", err)
		}
	})
	testkit.Eventually(t, 30*time.Second, "both tables loaded", mux.Ready)
	addr := ln.Addr().String()

	client := func(table string) *serving.Client {
		c := serving.NewClient(serving.ClientConfig{Hosts: serving.StaticHosts(addr), Table: table,
			PingPeriod: 50 * time.Millisecond, NoShardWait: 500 * time.Millisecond, Logger: testkit.Logger()})
		ctx, cancel := context.WithCancel(context.Background())
		runDone := make(chan error, 1)
		go func() { runDone <- c.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-runDone })
		return c
	}
	for _, want := range tables {
		values, err := client(want).Get(testkit.Context(t, 10*time.Second), []string{"k"})
		if err != nil || string(values["k"]) != want {
			t.Errorf("a client of %s read %q: %v", want, values["k"], err)
		}
	}
	if values, err := client("cache.none").Get(testkit.Context(t, 10*time.Second), []string{"k"}); err == nil {
		t.Errorf("a client of a table served nowhere read %q", values)
	}

	// GetAfter: the record after the end of k's partition is waited for.
	one := client(tables[0])
	adm := testkit.Admin(t, brokers)
	ends, err := streams.EndOffsets(testkit.Context(t, 10*time.Second), adm, tables[0])
	if err != nil {
		t.Fatal(err)
	}
	p := streams.Partition("k", 4)
	after := map[int32]int64{p: ends[p] + 1}
	got := make(chan string, 1)
	go func() {
		values, err := one.GetAfter(testkit.Context(t, 20*time.Second), []string{"k"}, after)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(values["k"])
	}()
	select {
	case v := <-got:
		t.Fatalf("GetAfter answered %q before the record after the end was written", v)
	case <-time.After(300 * time.Millisecond):
	}
	write(tables[0], "fresh")
	if v := <-got; v != "fresh" {
		t.Fatalf("GetAfter answered %q, want the record written after", v)
	}
	// An offset the shard holds already is answered at once.
	values, err := one.GetAfter(testkit.Context(t, 5*time.Second), []string{"k"}, map[int32]int64{p: ends[p]})
	if err != nil || string(values["k"]) != "fresh" {
		t.Fatalf("GetAfter of an offset held: %q %v", values["k"], err)
	}
	// A table group writes in transactions: its partition ends in a
	// commit marker, which holds no entry and is waited for as a record.
	tx, err := testkit.Cluster(t, brokers).Transactional("test-tx", "serving-test-tx")
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(testkit.Context(t, 30*time.Second), &kgo.Record{Topic: tables[0], Key: []byte("k"), Value: []byte("committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(testkit.Context(t, 30*time.Second), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	ends, err = streams.EndOffsets(testkit.Context(t, 10*time.Second), adm, tables[0])
	if err != nil {
		t.Fatal(err)
	}
	values, err = one.GetAfter(testkit.Context(t, 10*time.Second), []string{"k"}, map[int32]int64{p: ends[p]})
	if err != nil || string(values["k"]) != "committed" {
		t.Fatalf("GetAfter of a transaction's marker: %q %v", values["k"], err)
	}
}
