package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// RunConfig configures the scheduler: the router, a worker per stage and
// the timer service.
type RunConfig struct {
	Streams table.Config
	Stages  Config
	// Impls replaces the stage of a name (tests, programs embedding
	// offerlog); the others are opened from Stages.
	Impls   map[string]Stage
	Timeout time.Duration
	// TimerMemory is the timer service's store's memory (default
	// DefaultTimerMemory).
	TimerMemory int64
	Metrics     *Metrics
	Logger      *slog.Logger
	// OnReady is called once every part runs.
	OnReady func()
	// OnMatcher, if set, is given the matcher of the aggregate's answers
	// the workers wait on, for a process that runs the aggregate too to
	// hand it its answers (offers.Config.OnAnswer); Run calls the remove
	// it returns when it stops.
	OnMatcher func(*streams.Replies[schemas.OfferResult]) (remove func())
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
	kafka := cfg.Streams.Cluster
	prod, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.ClientID("offerlog-scheduler"))
	if err != nil {
		return err
	}
	defer prod.Close()
	view := table.NewView(cfg.Streams, offers.Table, offers.TableCodec, "scheduler-offers")
	results := offers.NewResults(cfg.Logger)
	if cfg.OnMatcher != nil {
		defer cfg.OnMatcher(results)()
	}
	client := offers.NewClient(prod, results, cfg.Timeout)

	// The view outlives its readers (routers, workers, pushers, re-crawls).
	return table.RunView(ctx, view, func(ctx context.Context) error {
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
		goRun("answers", func(ctx context.Context) error { return results.Run(ctx, kafka) })
		select {
		case <-view.Ready():
		case <-ctx.Done():
		}
		select {
		case <-results.Ready():
		case <-ctx.Done():
		}
		for _, sc := range cfg.Stages.Stages {
			r := &router{view: view, stages: []StageConfig{sc}, impls: impls, prod: prod, m: cfg.Metrics, log: cfg.Logger}
			goRun("router "+sc.Name, func(ctx context.Context) error { return r.run(ctx, kafka) })
		}
		for _, s := range cfg.Stages.Stages {
			w := newWorker(s, impls[s.Name], view, client, prod, cfg.Metrics, cfg.Logger)
			goRun("stage "+s.Name, func(ctx context.Context) error { return w.run(ctx, kafka) })
			if p := newPusher(s, view, prod, cfg.Logger); p != nil {
				goRun("push "+s.Name, func(ctx context.Context) error { return p.run(ctx, kafka, prod, cfg.Metrics) })
			}
			if s.RecrawlEvery > 0 {
				goRun("recrawl "+s.Name, func(ctx context.Context) error {
					return recrawlEvery(ctx, s, impls[s.Name], view, prod, kafka.Admin(), cfg.Logger)
				})
			}
		}
		t := &Timers{Cluster: kafka, Dir: filepath.Join(cfg.Streams.StateDir, "timers"), Memory: cfg.TimerMemory, Cache: cfg.Streams.Cache, Prod: prod,
			Metrics: cfg.Metrics, Logger: cfg.Logger}
		goRun("timers", t.Run)
		if ctx.Err() == nil && cfg.OnReady != nil {
			cfg.OnReady()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// Recrawl walks every offer of the aggregate's table topic (as it is now),
// asks the stage ShouldProcess, and queues the offers it wants in the
// stage's low-priority queue, a thousand commands at a time. It reads the
// topic twice and never holds the offers in memory: first each key's last
// offset, then the records at those offsets, streamed. It returns how
// many it queued.
func Recrawl(ctx context.Context, kafka *streams.Cluster, sc StageConfig, stage Stage, log *slog.Logger) (int, error) {
	cl, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ClientID("offerlog-recrawl"))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	rc := recrawler{sc: sc, stage: stage, prod: cl, adm: kafka.Admin(), log: log}
	var sendErr error
	err = streams.ReadLatest(ctx, kafka, string(topics.OffersTable), func(r *kgo.Record) {
		var rec schemas.OfferRecord
		if sendErr != nil || schemas.OfferRecords.Decode(r.Value, &rec) != nil {
			return
		}
		sendErr = rc.offer(ctx, &rec)
	})
	if err = errors.Join(err, sendErr, rc.flush(ctx)); err != nil {
		return rc.queued, fmt.Errorf("recrawl: %w", err)
	}
	return rc.queued, nil
}

// recrawlAhead bounds how far a re-crawl runs ahead of the aggregate and
// of the stage: it sends its next batch of commands only once offers.commands
// and the stage's low-priority queue hold no more than this many records
// not yet done. A re-crawl of a million offers thus never buries fresh
// changes behind its commands at the aggregate; it goes at the stage's pace.
const recrawlAhead = 2000

// recrawler decides, offer by offer, what a re-crawl queues, and sends the
// commands in batches, each once the backlog allows it.
type recrawler struct {
	sc     StageConfig
	stage  Stage
	prod   *kgo.Client
	adm    *kadm.Client
	log    *slog.Logger
	cmds   []*schemas.OfferCommand
	queued int
}

func (rc *recrawler) offer(ctx context.Context, rec *schemas.OfferRecord) error {
	st := stateOf(rec, rc.sc.Name)
	if rec.Offer.Status == schemas.OfferDeleted || rec.Archived || st.Queued {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, rc.sc.Timeout)
	d, err := rc.stage.ShouldProcess(cctx, &rec.Offer, rec.Version, st)
	cancel()
	if err != nil {
		rc.log.Warn("recrawl: ShouldProcess failed, queued anyway", "stage", rc.sc.Name, "offer", rec.Offer.ID, "err", err)
	}
	if err != nil || d.Process {
		rc.cmds = append(rc.cmds, &schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: rec.Offer.ID, SellerID: rec.Offer.SellerID,
			ExpectedVersion: -1, ReadVersion: -1, Stage: rc.sc.Name, Low: true})
	}
	if len(rc.cmds) >= 1000 {
		return rc.flush(ctx)
	}
	return nil
}

func (rc *recrawler) flush(ctx context.Context) error {
	if err := rc.yield(ctx); err != nil {
		return err
	}
	if err := offers.SendCommands(ctx, rc.prod, rc.cmds); err != nil {
		return err
	}
	rc.queued += len(rc.cmds)
	rc.cmds = rc.cmds[:0]
	return nil
}

// yield waits until the aggregate's commands and the stage's low-priority
// queue are within recrawlAhead of done.
func (rc *recrawler) yield(ctx context.Context) error {
	logged := time.Now()
	for {
		cmds, err := streams.Backlog(ctx, rc.adm, string(offers.Group), topics.OffersCommands)
		var low int64
		if err == nil {
			low, err = streams.Backlog(ctx, rc.adm, Group(rc.sc.Name, true), topics.QueueTopic(rc.sc.Name, true))
		}
		if err == nil && cmds+low <= recrawlAhead {
			return nil
		}
		if time.Since(logged) > 30*time.Second {
			rc.log.Info("recrawl: waits for the backlog", "stage", rc.sc.Name, "commands", cmds, "low_queue", low, "queued", rc.queued, "err", err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recrawlEvery re-crawls the stage every sc.RecrawlEvery over the
// scheduler's view of the offers (its local copy, one record per offer,
// read as it goes), until ctx is done.
func recrawlEvery(ctx context.Context, sc StageConfig, stage Stage, view *table.View, prod *kgo.Client, adm *kadm.Client, log *slog.Logger) error {
	tick := time.NewTicker(sc.RecrawlEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rc := recrawler{sc: sc, stage: stage, prod: prod, adm: adm, log: log}
		it, err := view.Iterator()
		if err != nil {
			log.Warn("recrawl: the offers view cannot be read", "stage", sc.Name, "err", err)
			continue
		}
		for it.Next() && err == nil && ctx.Err() == nil {
			v, verr := it.Value()
			if rec, ok := v.(*schemas.OfferRecord); ok && verr == nil {
				err = rc.offer(ctx, rec)
			}
		}
		it.Release()
		if err = errors.Join(err, rc.flush(ctx)); err != nil && ctx.Err() == nil {
			log.Warn("recrawl: commands not sent", "stage", sc.Name, "err", err)
			continue
		}
		log.Info("recrawl: queued offers (low priority)", "stage", sc.Name, "offers", rc.queued)
	}
}
