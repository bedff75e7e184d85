package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// RunConfig configures the scheduler: the router, a worker per stage and
// the timer service.
type RunConfig struct {
	Streams streams.Config
	Stages  Config
	// Impls replaces the stage of a name (tests, programs embedding
	// offerlog); the others are opened from Stages.
	Impls   map[string]Stage
	Timeout time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
	// OnReady is called once every part runs.
	OnReady func()
}

// Run runs the scheduler until ctx is done.
func Run(ctx context.Context, cfg RunConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(metrics.New())
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if err := cfg.Stages.Validate(); err != nil {
		return err
	}
	impls := map[string]Stage{}
	for _, s := range cfg.Stages.Stages {
		if st, ok := cfg.Impls[s.Name]; ok {
			impls[s.Name] = st
			continue
		}
		st, closeFn, err := s.Open()
		if err != nil {
			return err
		}
		defer closeFn()
		impls[s.Name] = st
	}
	brokers := cfg.Streams.Brokers
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.ClientID("offerlog-scheduler"))
	if err != nil {
		return err
	}
	defer prod.Close()
	view, err := goka.NewView(brokers, offers.Table, offers.TableCodec, cfg.Streams.ViewOptions("scheduler-offers")...)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	results := offers.NewResults(cfg.Logger)
	client := offers.NewClient(prod, results, cfg.Timeout)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	goRun := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("scheduler %s: %w", name, err))
				mu.Unlock()
				cancel()
			}
		}()
	}
	goRun("view", view.Run)
	goRun("answers", func(ctx context.Context) error { return results.Run(ctx, brokers) })
	select {
	case <-view.WaitRunning():
	case <-ctx.Done():
	}
	select {
	case <-results.Ready():
	case <-ctx.Done():
	}
	r := &router{stages: cfg.Stages.Stages, impls: impls, prod: prod, m: cfg.Metrics, log: cfg.Logger}
	goRun("router", func(ctx context.Context) error { return r.run(ctx, brokers) })
	for _, s := range cfg.Stages.Stages {
		w := newWorker(s, impls[s.Name], view, client, prod, cfg.Metrics, cfg.Logger)
		goRun("stage "+s.Name, func(ctx context.Context) error { return w.run(ctx, brokers) })
	}
	t := &Timers{Brokers: brokers, Dir: filepath.Join(cfg.Streams.StateDir, "timers"), Prod: prod, Metrics: cfg.Metrics, Logger: cfg.Logger}
	goRun("timers", t.Run)
	if ctx.Err() == nil && cfg.OnReady != nil {
		cfg.OnReady()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Recrawl walks every offer of the aggregate's table (as it is now), asks
// the stage ShouldProcess, and queues the offers it wants in the stage's
// low-priority queue. It returns how many it queued.
func Recrawl(ctx context.Context, brokers []string, sc StageConfig, stage Stage, log *slog.Logger) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ClientID("offerlog-recrawl"))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	latest := map[string]*schemas.OfferRecord{}
	err = streams.ReadToEnd(ctx, brokers, topics.OffersTable, func(r *kgo.Record) {
		if r.Value == nil {
			delete(latest, string(r.Key))
			return
		}
		var rec schemas.OfferRecord
		if err := schemas.OfferRecords.Decode(r.Value, &rec); err == nil {
			latest[string(r.Key)] = &rec
		}
	})
	if err != nil {
		return 0, fmt.Errorf("recrawl: %w", err)
	}
	var cmds []*schemas.OfferCommand
	for _, rec := range latest {
		st := stateOf(rec, sc.Name)
		if rec.Offer.Status == schemas.OfferDeleted || st.Queued {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, sc.Timeout)
		d, err := stage.ShouldProcess(cctx, &rec.Offer, rec.Version, st)
		cancel()
		if err != nil {
			log.Warn("recrawl: ShouldProcess failed, queued anyway", "offer", rec.Offer.ID, "err", err)
		}
		if err != nil || d.Process {
			cmds = append(cmds, &schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: rec.Offer.ID, SellerID: rec.Offer.SellerID,
				ExpectedVersion: -1, ReadVersion: -1, Stage: sc.Name, Low: true})
		}
	}
	return len(cmds), send(ctx, cl, cmds)
}
