package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// offerConcurrency is how many clients the API benchmarks run at once.
const offerConcurrency = 64

// runOffers loads env.Offers offers into the aggregate (CREATE commands
// written straight to offers.commands, timed from the first command to the
// last answer), then measures writes (updates with the expected version)
// and reads by id through the HTTP API with 64 concurrent clients, then the
// replay of the aggregate's table from its commands.
func runOffers(ctx context.Context, env *Env) (Result, error) {
	n := env.Offers
	cfg := platform.DefaultConfig()
	cfg.Insecure = true  // measured without auth; a token check is a map lookup and a SHA-256
	cfg.Memory = 1 << 30 // offerlog dev's default budget
	cfg.Brokers, cfg.Client, cfg.DataDir, cfg.HTTPAddr, cfg.GRPCAddr = env.Brokers, env.Cluster.Settings(), env.StateDir, "127.0.0.1:0", ""
	cfg.Partitions, cfg.Logger = env.Partitions, env.Logger
	cfg.Components = []string{platform.ComponentOffers, platform.ComponentCabinet, platform.ComponentDrafts, platform.ComponentAPI}
	p, err := startPlatform(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer p.stop()

	// Load: CREATE commands, answered once applied.
	ids := make([]string, n)
	for i := range n {
		ids[i] = offers.IDFrom(uint64(i))
	}
	if err := createOffers(ctx, env.Brokers, 0, n); err != nil {
		return Result{}, err
	}
	if err := p.waitOrFail(ctx, env, int64(n), topics.OffersResults); err != nil {
		return Result{}, err
	}
	// n answers can be there before every command is decided: a command
	// processed again after a rebalance is answered again. The writes must
	// not queue behind the load's last commands: in a full run, 44 808
	// commands other than the writes were decided while the writes ran,
	// and a write waited 3.6 s.
	if err := committedAll(ctx, env, string(offers.Group), topics.OffersCommands); err != nil {
		return Result{}, fmt.Errorf("the aggregate did not catch up: %w", err)
	}
	d, err := spanOf(ctx, env, topics.OffersCommands, topics.OffersResults)
	if err != nil {
		return Result{}, err
	}
	load := Result{Records: n, Duration: d}

	// Let the rest of the platform catch up (the cabinet, the API's views)
	// so that the API is measured alone.
	base := "http://" + p.info.HTTPAddr
	if err := settle(ctx, env, base+"/v1/offers/"+ids[n-1]); err != nil {
		return Result{}, err
	}
	hops := watchHops(ctx, base+"/metrics", "offer", 0.05)
	writes, err := hammer(ctx, min(n, 20_000), func(i int) error {
		body := fmt.Sprintf(`{"seller_id":"seller-%d","expected_version":1,"offer":{"category":"cars","title":"updated %d","price":%d,"currency":"RUB"}}`,
			i%1000, i, 2000+i)
		return call(ctx, "PUT", base+"/v1/offers/"+ids[i], body, http.StatusOK)
	})
	if err != nil {
		return Result{}, fmt.Errorf("writes: %w", err)
	}
	writes.Name = "writes"
	writes.Note += hops()
	// Hot offers: the same number of writes to 1 000 offers, each written
	// 20 times (a seller's prices), naming no version.
	hotN := min(n, 1000)
	hot, err := hammer(ctx, min(n, 20_000), func(i int) error {
		body := fmt.Sprintf(`{"seller_id":"seller-%d","expected_version":-1,"offer":{"category":"cars","title":"hot %d","price":%d,"currency":"RUB"}}`,
			i%hotN%1000, i, 3000+i)
		return call(ctx, "PUT", base+"/v1/offers/"+ids[i%hotN], body, http.StatusOK)
	})
	if err != nil {
		return Result{}, fmt.Errorf("hot writes: %w", err)
	}
	hot.Name = "hot-writes"
	hot.Note = fmt.Sprintf("the writes' load on %d offers, each written many times (expected_version -1)", hotN)
	// 100 000 reads (fewer for a small run: the bench's own test).
	nReads := min(100_000, 10*n)
	reads, err := hammer(ctx, nReads, func(i int) error {
		return call(ctx, "GET", base+"/v1/offers/"+ids[(i*7919)%n], "", http.StatusOK)
	})
	if err != nil {
		return Result{}, fmt.Errorf("reads: %w", err)
	}
	reads.Name = "reads"
	// The server's own tail, before any offer logic: its health check
	// under the same load.
	health, err := hammer(ctx, nReads, func(int) error { return call(ctx, "GET", base+"/healthz", "", http.StatusOK) })
	if err != nil {
		return Result{}, fmt.Errorf("healthz: %w", err)
	}
	health.Name = "healthz"
	trivial, err := trivialReads(ctx, nReads, reads)
	if err != nil {
		return Result{}, fmt.Errorf("trivial server: %w", err)
	}
	if err := p.stop(); err != nil {
		return Result{}, err
	}
	cached, err := cacheReads(ctx, env, cfg, ids, nReads)
	if err != nil {
		return Result{}, fmt.Errorf("reads through the cache: %w", err)
	}

	// The ceiling of the writes: the minimal write path, the hot writes'
	// load, on the same broker, offerlog stopped.
	minimal, err := runMinimalWrites(ctx, env, min(n, 20_000), hotN)
	if err != nil {
		return Result{}, fmt.Errorf("the minimal write path: %w", err)
	}

	// Replay the aggregate from its commands (the loads and the writes).
	total, err := recordsIn(ctx, env, topics.OffersCommands)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	// As `offerlog replay offers` runs it: the stores given the budget.
	err = platform.Replay(ctx, platform.ComponentOffers, platform.Replaying{Config: cfg, Logger: env.Logger,
		Streams: table.Config{Cluster: env.Cluster, StateDir: env.StateDir + "/replay", Replication: 1, Logger: env.Logger}})
	if err != nil {
		return Result{}, fmt.Errorf("replay: %w", err)
	}
	replay := Result{Name: "replay", Records: int(total), Duration: time.Since(start),
		Note: "wall time of `offerlog replay offers`, group join and table recreation included"}
	load.Also = []Result{writes, hot, minimal, reads, health, trivial, cached, replay}
	load.Note = fmt.Sprintf("%d offers of 1000 sellers created by commands written straight to offers.commands, timed from the first "+
		"command to the last answer (each command also writes the table, offers.events, cabinet.changes, cabinet.presets); "+
		"writes and reads through the HTTP API by %d concurrent clients, latency per request (a write returns once the aggregate "+
		"answered and the API's view shows it)", n, offerConcurrency)
	return load, nil
}

// cacheReads runs the reads' load against an API that holds no copy of
// offers-table (--reads cache): a process of the cache (one shard of the
// whole table) and the API, which asks the cache over gRPC for each read,
// as the API pods of deploy/k8s ask the cache's.
func cacheReads(ctx context.Context, env *Env, cfg platform.Config, ids []string, reads int) (Result, error) {
	cfg.DataDir = env.StateDir + "/reads-cache"
	cfg.Components = []string{platform.ComponentCache, platform.ComponentAPI}
	cfg.Reads, cfg.Cache.Table, cfg.Cache.Addr, cfg.Cache.Shards = platform.ReadsCache, string(topics.OffersTable+","+topics.RegistryTable+","+topics.OffersArchive), "127.0.0.1:0", 1
	p, err := startPlatform(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer p.stop()
	n := len(ids)
	base := "http://" + p.info.HTTPAddr
	if err := settle(ctx, env, base+"/v1/offers/"+ids[n-1]); err != nil {
		return Result{}, err
	}
	r, err := hammer(ctx, reads, func(i int) error {
		return call(ctx, "GET", base+"/v1/offers/"+ids[(i*7919)%n], "", http.StatusOK)
	})
	if err != nil {
		return Result{}, err
	}
	r.Name = "reads-cache"
	r.Note = "the reads' load against an API with --reads cache: each read is a gRPC Get to the cache's server of offers-table " +
		"(in the same process here), the API holding no copy of the table"
	return r, p.stop()
}

func benchOffer(i int, price int64) *schemas.Offer {
	return &schemas.Offer{Category: "cars", Title: fmt.Sprintf("offer %d: a second-hand car in good condition", i),
		Description: strings.Repeat("one owner, garage kept. ", 8), Price: &price, Currency: "RUB",
		Attributes: schemas.Attributes{{Name: "color", Value: "red"}, {Name: "year", Value: "2015"}}}
}

// trivialReads runs the reads' load (n GETs, 64 clients) against a trivial
// Go HTTP server answering every GET with a body as large as the offers'
// average, in the same process: the floor of what the machine, the
// load generator and net/http allow, which issue 36 compares the reads' p99
// to.
func trivialReads(ctx context.Context, n int, like Result) (Result, error) {
	body := []byte(`{"offer_id":"x","version":1,"offer":{"category":"cars","title":"offer 1: a second-hand car in good condition",` +
		`"description":"` + strings.Repeat("one owner, garage kept. ", 8) + `","price":1001,"currency":"RUB"}}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-errc }()
	base := "http://" + ln.Addr().String() + "/v1/offers/"
	r, err := hammer(ctx, n, func(i int) error { return call(ctx, "GET", base+fmt.Sprint(i), "", http.StatusOK) })
	r.Name = "reads-trivial"
	if err == nil && len(like.Latencies) > 0 && len(r.Latencies) > 0 {
		r.Note += fmt.Sprintf("; the offers' reads p99 is %.1f× this one's", float64(like.Percentile(99))/float64(r.Percentile(99)))
	}
	return r, err
}

// settle waits until the cabinet group has applied every change and the
// API answers url (the last offer loaded).
func settle(ctx context.Context, env *Env, url string) error {
	if err := committedAll(ctx, env, "cabinet", topics.CabinetChanges); err != nil {
		return fmt.Errorf("the cabinet did not catch up: %w", err)
	}
	for call(ctx, "GET", url, "", http.StatusOK) != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// committedAll waits until group has committed every record topic holds
// now.
func committedAll(ctx context.Context, env *Env, group, topic string) error {
	ends, err := env.Admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	return streams.WaitCommitted(ctx, env.Admin, group, ends.Offsets())
}

// hammer runs op(0..n-1) on offerConcurrency workers and times each call.
// It fails only if more than 1% of the calls failed.
func hammer(ctx context.Context, n int, op func(i int) error) (Result, error) {
	r, failed, err := drive(ctx, offerConcurrency, func(i int) bool { return i < n }, op)
	if failed*100 > int64(n) {
		return r, err
	}
	return r, nil
}

// drive runs op on workers goroutines, each taking the next i as soon as
// its call returns, for as long as more(i) says, and times each call.
// Failed calls are counted, left out of the latencies and of Records; the
// note says the maximum latency and the failures. It returns the failures
// and an error naming the first.
func drive(ctx context.Context, workers int, more func(i int) bool, op func(i int) error) (Result, int64, error) {
	var lat []time.Duration
	var mu sync.Mutex
	var next, failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if !more(i) || ctx.Err() != nil {
					return
				}
				t := time.Now()
				if err := op(i); err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				d := time.Since(t)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r := Result{Records: len(lat), Duration: time.Since(start), Latencies: lat}
	r.Note = fmt.Sprintf("%d clients back to back; max %s; %d failed", workers, r.Percentile(100).Round(100*time.Microsecond), failed.Load())
	if firstErr != nil {
		r.Note += fmt.Sprintf(" (the first: %v)", firstErr)
		return r, failed.Load(), fmt.Errorf("%d calls failed, the first: %w", failed.Load(), firstErr)
	}
	return r, 0, nil
}

// httpClient keeps as many connections as an open loop has requests in
// flight: with fewer, most of its requests dialled a new one.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: maxOpenLoop}, Timeout: time.Minute}

func call(ctx context.Context, method, url, body string, want int) error {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return nil
}
