package serving_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/topics"
)

// TestClientOfOneTable gives a client two servers that hold the same key in
// two tables: with Table set, Get asks only the server of that table, and a
// table no server holds has no shard.
func TestClientOfOneTable(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	tables := []string{"cache.one", "cache.two"}
	var addrs []string
	for _, name := range tables {
		testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: name, Partitions: 4, Compacted: true}})
		cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
		if err := cl.ProduceSync(testkit.Context(t, 30*time.Second), &kgo.Record{Topic: name, Key: []byte("k"), Value: []byte(name)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := serving.NewServer(serving.ServerConfig{Brokers: brokers, Table: name, Shards: 1, DC: "dc1", Host: name,
			Owner: serving.Static{Shard: 0}, Logger: testkit.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
		testkit.Eventually(t, 30*time.Second, name+" loaded", srv.Ready)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, want := range append(tables, "cache.none") {
		c := serving.NewClient(serving.ClientConfig{Hosts: serving.StaticHosts(addrs...), Table: want,
			PingPeriod: 50 * time.Millisecond, NoShardWait: 500 * time.Millisecond, Logger: testkit.Logger()})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runDone := make(chan error, 1)
		go func() { runDone <- c.Run(ctx) }()
		values, err := c.Get(ctx, []string{"k"})
		switch {
		case want == "cache.none" && err == nil:
			t.Errorf("a client of %s got %q: no server holds it", want, values)
		case want != "cache.none" && err != nil:
			t.Errorf("a client of %s: %v", want, err)
		case want != "cache.none" && string(values["k"]) != want:
			t.Errorf("a client of %s read %q", want, values["k"])
		}
		cancel()
		<-runDone
	}
}
