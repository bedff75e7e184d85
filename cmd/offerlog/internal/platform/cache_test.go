package platform

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/topics"
)

// TestCacheRunsAgainAfterItEnded runs the cache component's run twice, as
// the supervisor restarts it after a failure: the second run listens on the
// same address again and serves both of its tables (the first run's end
// closed its listener; a restart that reused it served nothing).
func TestCacheRunsAgainAfterItEnded(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	tables := []string{"cache.a", "cache.b"}
	cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	for _, table := range tables {
		testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: table, Partitions: 2, Compacted: true}})
		if err := cl.ProduceSync(testkit.Context(t, 30*time.Second), &kgo.Record{Topic: table, Key: []byte("k"), Value: []byte(table)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Cache = CacheConfig{Table: tables[0] + "," + tables[1], Addr: "127.0.0.1:0", DC: "dc1", Host: "h", Shards: 1}
	r, err := newCacheRunner(cfg, testkit.Cluster(t, brokers), metrics.New(), testkit.Logger(), auth.Off(testkit.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.run(ctx) }()
		testkit.Eventually(t, 30*time.Second, "both tables loaded", r.ready)
		for _, table := range tables {
			c := serving.NewClient(serving.ClientConfig{Hosts: serving.StaticHosts(r.addr), Table: table,
				PingPeriod: 50 * time.Millisecond, NoShardWait: 10 * time.Second, Logger: testkit.Logger()})
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			runDone := make(chan error, 1)
			go func() { runDone <- c.Run(cctx) }()
			values, err := c.Get(cctx, []string{"k"})
			ccancel()
			<-runDone
			if err != nil || string(values["k"]) != table {
				t.Fatalf("run %d: %s read %q: %v", round+1, table, values["k"], err)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run %d: %v", round+1, err)
		}
	}
}
