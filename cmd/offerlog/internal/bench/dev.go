package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// DefaultWaitRate and DefaultWaitFor are the documents ?wait=true load of
// the dev scenario: issue 36 states its target at 5 000 documents/s.
const (
	DefaultWaitRate = 5000
	DefaultWaitFor  = 10 * time.Second
)

// runDev runs the whole platform as `offerlog dev` does (every component,
// its own embedded broker with its log on disk, the 1 GiB memory budget),
// loads env.DevDocs documents and env.DevOffers offers into its tables,
// then measures documents posted with ?wait=true at env.WaitRate (5 000/s) (open loop: a
// slow answer does not slow the load), then stops it and times the restart
// until every component is ready, with the tables reused from the disk.
func runDev(ctx context.Context, env *Env) (Result, error) {
	dir := filepath.Join(env.StateDir, "data")
	cfg := platform.DefaultConfig()
	cfg.Insecure = true  // measured without auth; a token check is a map lookup and a SHA-256
	cfg.Memory = 1 << 30 // offerlog dev's default budget
	cfg.DataDir, cfg.KafkaAddr, cfg.HTTPAddr, cfg.GRPCAddr = dir, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Cache.Addr = "127.0.0.1:0"
	cfg.Partitions, cfg.Logger = env.Partitions, env.Logger
	p, err := startPlatform(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	// p is the restarted platform by the end: stop that one.
	defer func() { _ = p.stop() }()
	base := "http://" + p.info.HTTPAddr
	if err := call(ctx, "PUT", base+"/v1/clients/"+client+"/epochs/1", epochJSON, http.StatusCreated); err != nil {
		return Result{}, fmt.Errorf("epoch: %w", err)
	}

	// 1. The tables: documents through the registry, offers through the
	// aggregate, and every group caught up with them.
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.info.Brokers...))
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	start := time.Now()
	if err := writeDocs(ctx, p.info.Brokers, topics.DocumentsIngest, env.DevDocs, 0); err != nil {
		return Result{}, err
	}
	if err := createOffers(ctx, p.info.Brokers, 0, env.DevOffers); err != nil {
		return Result{}, err
	}
	for topic, n := range map[string]int{topics.DocumentsResults: env.DevDocs, topics.OffersResults: env.DevOffers} {
		if err := p.waitOrFail(ctx, &Env{Admin: adm}, int64(n), topic); err != nil {
			return Result{}, err
		}
	}
	if err := caughtUp(ctx, adm); err != nil {
		return Result{}, err
	}
	load := Result{Records: env.DevDocs + env.DevOffers, Duration: time.Since(start)}
	load.Note = fmt.Sprintf("offerlog dev with every component and its own broker: %d documents and %d offers loaded "+
		"into its tables (wall time until every group caught up)", env.DevDocs, env.DevOffers)

	// 2. Documents posted with ?wait=true at 5 000/s.
	rate, d := env.WaitRate, env.WaitFor
	if rate <= 0 || d <= 0 {
		rate, d = DefaultWaitRate, DefaultWaitFor
	}
	hops := watchHops(ctx, base+"/metrics", "document", 0.25)
	wait, err := openLoop(ctx, rate, d, func(i int) error {
		return call(ctx, "POST", base+"/v1/clients/"+client+"/documents?wait=true", waitDoc(i), http.StatusOK)
	})
	if err != nil {
		return Result{}, fmt.Errorf("wait: %w", err)
	}
	wait.Name = "wait"
	wait.Note += hops()

	// 3. Restart to ready, on the same data directory.
	if err := p.stop(); err != nil {
		return Result{}, fmt.Errorf("stop: %w", err)
	}
	start = time.Now()
	p, err = startPlatform(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	ready := time.Since(start)
	// The tables were reused: the last document and offer are there.
	base = "http://" + p.info.HTTPAddr
	if err := call(ctx, "GET", base+"/v1/offers/"+offers.IDFrom(uint64(env.DevOffers-1)), "", http.StatusOK); err != nil {
		return Result{}, fmt.Errorf("after the restart: %w", err)
	}
	if err := call(ctx, "GET", base+"/readyz", "", http.StatusOK); err != nil {
		return Result{}, fmt.Errorf("after the restart: %w", err)
	}
	restart := Result{Name: "restart", Records: 1, Duration: ready, Note: fmt.Sprintf(
		"offerlog dev stopped and started again on its data directory (%d documents, %d offers in its tables): "+
			"from the start to every component ready", env.DevDocs, env.DevOffers)}
	load.Also = []Result{wait, restart}
	// The memory figure: this process while offerlog dev runs on its
	// loaded tables, collected first (garbage is not what it needs).
	debug.FreeOSMemory()
	load.RSS = rss("VmRSS")
	return load, nil
}

// running is a platform started by startPlatform.
type running struct {
	info   platform.Info
	cancel context.CancelFunc
	done   chan struct{} // closed when the platform stopped; err is then set
	err    error
}

// startPlatform runs cfg until every component is ready.
func startPlatform(ctx context.Context, cfg platform.Config) (*running, error) {
	started := make(chan platform.Info, 1)
	cfg.Started = func(i platform.Info) { started <- i }
	runCtx, cancel := context.WithCancel(ctx)
	p := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		p.err = platform.Run(runCtx, cfg)
		close(p.done)
	}()
	select {
	case p.info = <-started:
		return p, nil
	case <-p.done:
		cancel()
		return nil, fmt.Errorf("the platform stopped: %w", p.err)
	}
}

// stop stops the platform and returns its error; it may be called again.
func (p *running) stop() error {
	p.cancel()
	<-p.done
	return p.err
}

// waitOrFail waits for topic to hold n records, or for the platform to
// stop.
func (p *running) waitOrFail(ctx context.Context, env *Env, n int64, topic string) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	select {
	case err := <-waitAsync(wctx, env, n, topic):
		return err
	case <-p.done:
		return fmt.Errorf("the platform stopped: %w", p.err)
	}
}

// caughtUp waits until every consumer group has committed every record of
// its inputs.
func caughtUp(ctx context.Context, adm *kadm.Client) error {
	for {
		lags, err := adm.Lag(ctx)
		if err == nil && lags.Error() == nil {
			var total int64
			for _, l := range lags {
				total += l.Lag.Total()
			}
			if total == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createOffers writes CREATE commands of offers first..first+n-1 straight to
// offers.commands.
func createOffers(ctx context.Context, brokers []string, first, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := first; i < first+n; i++ {
		id := offers.IDFrom(uint64(i))
		p := int64(1000 + i%50_000)
		data, err := schemas.OfferCommands.Encode(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id,
			SellerID: fmt.Sprintf("seller-%d", i%1000), ExpectedVersion: -1, DraftID: id, Offer: benchOffer(i, p)})
		if err != nil {
			return err
		}
		cl.Produce(ctx, &kgo.Record{Topic: topics.OffersCommands, Key: []byte(id), Value: data}, nil)
	}
	return cl.Flush(ctx)
}

// openLoop calls op(i) at rate per second for d, each call in its own
// goroutine at its own time, so that a slow answer does not delay the next
// call (no coordinated omission), and times each call. It fails only if
// more than 1% of the calls failed.
func openLoop(ctx context.Context, rate int, d time.Duration, op func(i int) error) (Result, error) {
	n := int(d.Seconds() * float64(rate))
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		lat      []time.Duration
		failed   int
		shed     int
		inFlight int
		firstErr error
	)
	start := time.Now()
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); w > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return Result{}, ctx.Err()
			case <-time.After(w):
			}
		}
		// A server that falls behind the rate would have requests pile
		// up without end (each two sockets of this process): past
		// maxOpenLoop in flight, the next are not sent, and counted.
		mu.Lock()
		if inFlight >= maxOpenLoop {
			shed++
			mu.Unlock()
			continue
		}
		inFlight++
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			err := op(i)
			took := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			if err != nil {
				if failed++; firstErr == nil {
					firstErr = err
				}
				return
			}
			lat = append(lat, took)
		}()
	}
	wg.Wait()
	res := Result{Records: len(lat), Duration: time.Since(start), Latencies: lat, Failed: failed + shed}
	res.Note = fmt.Sprintf("open loop at %d/s for %s; max %s; %d failed; %d not sent (%d already in flight)", rate, d,
		res.Percentile(100).Round(100*time.Microsecond), failed, shed, maxOpenLoop)
	if firstErr != nil {
		res.Note += fmt.Sprintf(" (the first: %v)", firstErr)
		if failed*100 > n {
			return res, fmt.Errorf("%d calls failed, the first: %w", failed, firstErr)
		}
	}
	return res, nil
}

// maxOpenLoop bounds an open loop's requests in flight (the API serves
// 1 024 connections at once).
const maxOpenLoop = 1000

// epochJSON is epochSchema over the HTTP API.
const epochJSON = `{"fields": [{"name": "title", "type": "string", "required": true}, {"name": "price", "type": "int64"},
 {"name": "tags", "type": "string_list"}], "embeddings": [{"name": "vec", "dimension": 32}]}`

// waitDoc is document i of the ?wait=true load, over the HTTP API: new keys,
// so every one is ACCEPTED.
func waitDoc(i int) string {
	vec := "0"
	for range 31 {
		vec += ",0"
	}
	return fmt.Sprintf(`{"pk":"wait-%d","version":1,"epoch":1,"action":"UPSERT","timestamp":%q,`+
		`"fields":{"title":"offer %d: a second-hand bicycle","price":%d,"tags":["bike","sport"]},"embeddings":{"vec":[%s]}}`,
		i, time.Now().UTC().Format(time.RFC3339Nano), i, 1000+i, vec)
}
