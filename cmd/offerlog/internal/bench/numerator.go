package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// runNumerator gives doc_ids to env.Keys new keys in generation 1 (scheme 0:
// 16 shards), then seals a generation 2 where 5% of the keys vanished and 5%
// are new. Each generation is timed from its first offer sent to its last
// assignment written (the offers encoded before).
func runNumerator(ctx context.Context, env *Env) (Result, error) {
	n := env.Keys
	cfg := numerator.DefaultConfig()
	cfg.Streams = table.Config{Cluster: env.Cluster, StateDir: env.StateDir, Replication: 1, Logger: env.Logger}
	cfg.Coordinator = &coordinator.Local{}
	cfg.TTL, cfg.RebuildShare, cfg.RetryEvery = 1, 0, 100*time.Millisecond
	cfg.Logger = env.Logger
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{}) // closed when the numerator stopped; runErr is then set
	var runErr error
	go func() {
		runErr = numerator.Run(runCtx, cfg)
		close(done)
	}()
	stop := func() error { cancel(); <-done; return runErr }
	defer stop()

	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(200_000))
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()

	generation := func(g int64, lo, hi int, wantAssignments int64) (Result, error) {
		// Encoded before the clock starts: the generator's own work is
		// not the numerator's (it shares the process and its 2 cores).
		recs := make([]*kgo.Record, 0, hi-lo)
		for i := lo; i < hi; i++ {
			k := fmt.Sprintf("%d/sku-%08d/1/1", 1+i%1000, i)
			data, err := schemas.OffersSeen.Encode(&schemas.OfferSeen{BusinessID: int64(1 + i%1000),
				OfferID: fmt.Sprintf("sku-%08d", i), ShopID: 1, WarehouseID: 1, Generation: g})
			if err != nil {
				return Result{}, err
			}
			recs = append(recs, &kgo.Record{Topic: topics.NumeratorOffers, Key: []byte(k), Value: data})
		}
		start := time.Now()
		for _, r := range recs {
			cl.Produce(ctx, r, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			return Result{}, err
		}
		marker, _ := schemas.GenerationMarkers.Encode(&schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: g, Scheme: -1})
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: marker}).FirstErr(); err != nil {
			return Result{}, err
		}
		select {
		case err := <-waitAsync(runCtx, env, wantAssignments, topics.NumeratorAssignments):
			if err != nil {
				return Result{}, err
			}
		case <-done:
			return Result{}, fmt.Errorf("the numerator stopped: %w", runErr)
		}
		return Result{Records: hi - lo, Duration: time.Since(start)}, nil
	}

	first, err := generation(1, 0, n, int64(n))
	if err != nil {
		return Result{}, err
	}
	vanish, fresh := n/20, n/20
	// Generation 2: keys vanish..n-1 seen again, n..n+fresh-1 new; 0..vanish-1
	// expire (TTL 1), so their ids go to the new keys.
	second, err := generation(2, vanish, n+fresh, int64(n+fresh+vanish))
	if err != nil {
		return Result{}, err
	}
	second.Name = "gen2"
	// The store is measured once the numerator stopped: its memtables,
	// which have no write-ahead log, are flushed to files on close.
	if err := stop(); err != nil {
		return Result{}, fmt.Errorf("the numerator stopped: %w", err)
	}
	size := dirBytes(filepath.Join(env.StateDir, "processor", string(numerator.Group)))
	first.BytesPerKey = float64(size) / float64(n+fresh)
	first.Also = []Result{second}
	first.Note = fmt.Sprintf("%d keys in generation 1; generation 2 sees %d of them again and %d new (%d expire, their ids reused); "+
		"each timed from its first offer sent to its last assignment written; table state on disk %.0f bytes per key (the group's local store)",
		n, n-vanish, fresh, vanish, first.BytesPerKey)
	return first, nil
}
