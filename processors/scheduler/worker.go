package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Group returns the consumer group of a stage's queue (low: its
// low-priority queue).
func Group(stage string, low bool) string {
	if low {
		return "scheduler-" + stage + "-low"
	}
	return "scheduler-" + stage
}

// newLimiter bounds a stage's calls to rate a second (0: unbounded), one at
// a time: x/time/rate's token bucket with a burst of one.
func newLimiter(r float64) *rate.Limiter {
	if r <= 0 {
		return rate.NewLimiter(rate.Inf, 1)
	}
	return rate.NewLimiter(rate.Limit(r), 1)
}

type worker struct {
	cfg     StageConfig
	stage   Stage
	view    *table.View
	offers  *offers.Client
	prod    *kgo.Client
	m       *Metrics
	log     *slog.Logger
	limit   *rate.Limiter
	backoff time.Duration
}

func newWorker(cfg StageConfig, stage Stage, view *table.View, oc *offers.Client, prod *kgo.Client, m *Metrics, log *slog.Logger) *worker {
	return &worker{cfg: cfg, stage: stage, view: view, offers: oc, prod: prod, m: m, log: log,
		limit: newLimiter(cfg.RateLimit), backoff: 100 * time.Millisecond}
}

// run reads the stage's queue and its low-priority queue until ctx is done.
// Every item takes one of the stage's max_parallelism slots, shared by
// both queues, fresh changes first (slots): a slow call occupies its slot
// only, never the items after it nor another stage. An item's offset is
// committed once its result is saved (or it is dead-lettered) and every
// item before it in its partition is done.
func (w *worker) run(ctx context.Context, kafka *streams.Cluster) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := newSlots(w.cfg.MaxParallelism, w.cfg.LowShare)
	loop := func(low bool) error {
		return streams.RunLoop(ctx, streams.LoopConfig{Cluster: kafka, Group: Group(w.cfg.Name, low),
			Topics: []string{topics.QueueTopic(w.cfg.Name, low)}, DeadTopic: topics.SchedulerDead, Producer: w.prod,
			Logger: w.log, Metrics: w.m.Loop, Backoff: streams.Backoff{Initial: w.backoff, Max: 10 * time.Second},
			Slots: queueSlots{s: slots, low: low}, Handler: w.item})
	}
	errs := make(chan error, 2)
	go func() { errs <- loop(false) }()
	go func() { errs <- loop(true) }()
	err := <-errs
	cancel()
	return errors.Join(err, <-errs)
}

// item processes one queue item.
// It returns nil once the item's result is saved (or the item is moot), a
// permanent error for an undecodable item, and another error when the
// result was not answered (the item is tried again).
func (w *worker) item(ctx context.Context, r *kgo.Record) error {
	var it schemas.QueueItem
	if err := schemas.QueueItems.Decode(r.Value, &it); err != nil {
		w.m.Processed.With(w.cfg.Name, "dead").Inc()
		return streams.Permanentf("undecodable queue item: %w", err)
	}
	rec, st, err := w.at(ctx, &it)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errViewBehind) {
			return err // not committed: the loop tries the item again, with backoff
		}
		w.m.Processed.With(w.cfg.Name, "gone").Inc()
		w.log.Warn("scheduler: queue item skipped", "stage", w.cfg.Name, "offer", it.OfferID, "err", err)
		return nil
	}
	if !st.Queued {
		w.m.Processed.With(w.cfg.Name, "not queued").Inc() // a repeated item: its result is saved
		return nil
	}
	res, perr := w.call(ctx, rec, st, it.At)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if perr != nil {
		return w.giveUp(ctx, r, rec, perr.Error())
	}
	c := &schemas.OfferCommand{Kind: schemas.CommandResult, OfferID: it.OfferID, SellerID: rec.Offer.SellerID,
		ExpectedVersion: -1, Stage: w.cfg.Name, ReadVersion: rec.Version, Offer: res.Offer, State: res.State, TimerAt: res.TimerAt}
	if w.cfg.Patches && res.Offer != nil {
		c.Patch, c.PatchFields = true, PatchOf(rec, res.Offer)
	}
	out, err := w.offers.Do(ctx, c)
	if err != nil {
		// Not committed: the loop tries the item again.
		return fmt.Errorf("stage %s: result for offer %s not answered: %w", w.cfg.Name, it.OfferID, err)
	}
	if out.Outcome == schemas.OutcomeInvalid {
		return w.giveUp(ctx, r, rec, fmt.Sprintf("stage %s: result refused: %s: %s", w.cfg.Name, out.Field, out.Reason))
	}
	w.m.Processed.With(w.cfg.Name, string(out.Outcome)).Inc()
	return nil
}

// giveUp sends the item to scheduler.dead with the reason and takes the
// offer out of the stage's queue, changing nothing else: no state, no
// version, no effect (a redrive, or the offer's next change, asks the
// stage again).
func (w *worker) giveUp(ctx context.Context, r *kgo.Record, rec *schemas.OfferRecord, reason string) error {
	w.dead(ctx, r, reason)
	c := &schemas.OfferCommand{Kind: schemas.CommandResult, OfferID: rec.Offer.ID, SellerID: rec.Offer.SellerID,
		ExpectedVersion: -1, Stage: w.cfg.Name, ReadVersion: rec.Version, Failed: reason}
	if _, err := w.offers.Do(ctx, c); err != nil {
		return fmt.Errorf("stage %s: release of offer %s not answered: %w", w.cfg.Name, rec.Offer.ID, err)
	}
	return nil
}

// call calls the stage's Process until it answers. A stage that is away
// (its connection not ready: down, restarting, unreachable) is waited for
// with backoff until max_wait after the item was queued (queued, from the
// log: a restart does not start the wait over), without counting
// failures; a stage that answers with an error is tried max_failures
// times. It returns the last error once it gives up.
func (w *worker) call(ctx context.Context, rec *schemas.OfferRecord, st schemas.StageState, queued time.Time) (Result, error) {
	retries := streams.Backoff{Initial: w.backoff, Max: 10 * time.Second}
	var away time.Time // since when the stage is away, zero while it answers
	for failures, attempt := 0, 1; ; attempt++ {
		if err := w.limit.Wait(ctx); err != nil {
			return Result{}, err
		}
		cctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
		start := time.Now()
		res, err := w.stage.Process(cctx, &rec.Offer, rec.Version, st)
		cancel()
		w.m.Calls.With(w.cfg.Name).Observe(time.Since(start).Seconds())
		switch {
		case err == nil:
			return res, nil
		case ctx.Err() != nil:
			return Result{}, ctx.Err()
		case Away(w.stage, err):
			w.m.Processed.With(w.cfg.Name, "stage away").Inc()
			if away.IsZero() {
				away = start
				if !queued.IsZero() && queued.Before(start) {
					away = queued
				}
				w.log.Warn("scheduler: stage away, waiting for it", "stage", w.cfg.Name, "offer", rec.Offer.ID, "max wait", w.cfg.MaxWait, "err", err)
			}
			if time.Since(away) >= w.cfg.MaxWait {
				return Result{}, fmt.Errorf("stage %s away, item queued more than %v ago: %w", w.cfg.Name, w.cfg.MaxWait, err)
			}
		default:
			away = time.Time{}
			w.m.Processed.With(w.cfg.Name, "failed call").Inc()
			if failures++; failures >= w.cfg.MaxFailures {
				return Result{}, fmt.Errorf("stage %s failed %d times: %w", w.cfg.Name, failures, err)
			}
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(retries.Wait(attempt)):
		}
	}
}

// at returns the offer and the stage's state from the view once it shows
// the item's offer version (or later) and the offer queued at the item's
// state version, or a later state (the item's result saved already).
func (w *worker) at(ctx context.Context, it *schemas.QueueItem) (*schemas.OfferRecord, schemas.StageState, error) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := awaitRecord(wctx, w.view, it.OfferID, func(r *schemas.OfferRecord) bool {
		st := stateOf(r, w.cfg.Name)
		return r.Version >= it.Version && (r.Offer.Status == schemas.OfferDeleted || st.Queued || st.Version > it.StateVersion)
	})
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		if w.viewHolds(ctx, it.OfferID) {
			// The record is there, behind the item, or the view could not
			// say it is not: the view lags (a broker restart, a loaded
			// machine). The item is tried again, never dropped for it.
			return nil, schemas.StageState{}, fmt.Errorf("%w: offer %s not at version %d, queued, in the view yet", errViewBehind, it.OfferID, it.Version)
		}
		return nil, schemas.StageState{}, fmt.Errorf("offer %s not at version %d, queued, in the view", it.OfferID, it.Version)
	case err != nil:
		// The view failed to answer (stopped, restarting): not the item's
		// fault, and no sign the offer is gone.
		return nil, schemas.StageState{}, fmt.Errorf("%w: %w", errViewBehind, err)
	}
	st := stateOf(r, w.cfg.Name)
	if r.Offer.Status == schemas.OfferDeleted {
		return nil, st, errors.New("deleted")
	}
	return r, st, nil
}

// viewHolds reports whether the view holds offer id, or cannot tell that
// it does not: once the view has read its topic to the end, an offer it
// does not hold has left the table. An offer new since the view's last
// read is not gone: a worker that called it so after a scheduler's restart
// skipped the item of a new offer, its stage never called (the topology
// test's due timers, one offer of 232).
func (w *worker) viewHolds(ctx context.Context, id string) bool {
	if v, err := w.view.Get(id); err != nil || v != nil {
		return true
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.view.Sync(sctx); err != nil {
		return true
	}
	v, err := w.view.Get(id)
	return err != nil || v != nil
}

func (w *worker) dead(ctx context.Context, r *kgo.Record, reason string) {
	w.m.Processed.With(w.cfg.Name, "dead").Inc()
	if err := streams.SendDeadLetter(ctx, w.prod, topics.SchedulerDead, Group(w.cfg.Name, false), r, reason); err != nil {
		w.log.Error("scheduler: dead letter not written", "stage", w.cfg.Name, "err", err)
	}
}

// errViewBehind is at's error when the offers view holds the item's offer
// but not yet at the item's version.
var errViewBehind = errors.New("scheduler: the offers view is behind")

// PatchOf returns the fields of the offer of read that result changes,
// those a stage may patch (offers.Patchable).
func PatchOf(read *schemas.OfferRecord, result *schemas.Offer) []string {
	next := *read
	next.Offer = *result
	changed := offers.ChangedFields(read, &next)
	return slices.DeleteFunc(changed, func(f string) bool { return !slices.Contains(offers.Patchable, f) })
}
