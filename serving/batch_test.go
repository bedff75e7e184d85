package serving_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/topics"
)

// TestConcurrentGetsShareRequests: with one request in flight to a host,
// the Gets that come meanwhile go together in the next; each gets its own
// keys' values, and the server answers fewer requests than there were Gets.
func TestConcurrentGetsShareRequests(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: table, Partitions: 4, Compacted: true}})
	kv := map[string]string{}
	for i := range 200 {
		kv[fmt.Sprint("k", i)] = fmt.Sprint("v", i)
	}
	produce(t, brokers, kv)

	reg := metrics.New()
	srv, err := serving.NewServer(serving.ServerConfig{Cluster: testkit.Cluster(t, brokers), Table: table, Shards: 1, DC: "a", Host: "a",
		Owner: serving.Static{Shard: 0}, Metrics: reg, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	ctx := testkit.Context(t, time.Minute)
	testkit.Eventually(t, 30*time.Second, "the shard loaded", srv.Ready)

	c := serving.NewClient(serving.ClientConfig{Hosts: serving.StaticHosts(addr), MaxInFlight: 1, Logger: testkit.Logger()})
	c.Ping(ctx)
	ok := reg.Counter("offerlog_cache_gets_total", "Cache Gets by outcome.", "outcome").With("ok")
	before := ok.Value()
	const gets = 200
	var wg sync.WaitGroup
	errs := make(chan error, gets)
	for i := range gets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := []string{fmt.Sprint("k", i), fmt.Sprint("k", (i+1)%200), "missing"}
			got, err := c.Get(ctx, keys)
			switch {
			case err != nil:
				errs <- err
			case len(got) != 2 || string(got[keys[0]]) != kv[keys[0]] || string(got[keys[1]]) != kv[keys[1]]:
				errs <- fmt.Errorf("Get %v: %q", keys, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	requests := ok.Value() - before
	t.Logf("%d Gets in %d requests", gets, requests)
	if requests >= gets {
		t.Errorf("%d concurrent Gets took %d requests: none shared one", gets, requests)
	}
}
