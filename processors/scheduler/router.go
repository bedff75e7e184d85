package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// MaxChain bounds chain reactions between stages (gost-scheduler.md,
// "Проблемы"): a change made by the MaxChain-th stage result in a row
// since the offer's last outside change is routed to no stage. A stage's
// timer still wakes it.
const MaxChain = 4

// Cut reports whether a change is past the chain bound: routed nowhere.
func Cut(ev *schemas.OfferEvent) bool { return ev.StageDepth >= MaxChain }

// Route returns the commands a change of an offer makes for one stage: none
// if the offer is deleted, already in the stage's queue (a stage with
// patches: already marked to run again), the change does not concern the
// stage, is the stage's own result, or is past the chain bound (Cut);
// otherwise ENQUEUE if should says so or fails (the seed queues an offer
// whose ShouldProcess failed), and SET_TIMER for a new timer.
func Route(cfg StageConfig, ev *schemas.OfferEvent, should func() (Should, error)) []*schemas.OfferCommand {
	if ev.Offer.Status == schemas.OfferDeleted || !cfg.Interested(ev.Changed) || ev.ByStage == cfg.Name || Cut(ev) {
		return nil
	}
	st := schemas.StageState{Stage: cfg.Name}
	for _, s := range ev.Stages {
		if s.Stage == cfg.Name {
			st = s
		}
	}
	if st.Queued && (!cfg.Patches || st.Again) {
		return nil
	}
	d, err := should()
	cmd := func(kind schemas.CommandKind) *schemas.OfferCommand {
		return &schemas.OfferCommand{Kind: kind, OfferID: ev.Offer.ID, SellerID: ev.Offer.SellerID, ExpectedVersion: -1,
			ReadVersion: -1, Stage: cfg.Name}
	}
	var out []*schemas.OfferCommand
	if err != nil || d.Process {
		c := cmd(schemas.CommandEnqueue)
		// A stage with patches is asked even while queued: its result may
		// apply to this change's version without having seen it (issue 52
		// defect 4), so the aggregate marks it to run once more (Again).
		c.Patch = cfg.Patches
		out = append(out, c)
	}
	if err == nil && d.TimerAt > 0 && d.TimerAt != st.TimerAt {
		c := cmd(schemas.CommandSetTimer)
		c.TimerAt = d.TimerAt
		out = append(out, c)
	}
	return out
}

// RouterGroup was the consumer group of the router of every stage; each
// stage now has its own (RouterGroupOf), which starts where this one was.
const RouterGroup = "scheduler-router"

// RouterGroupOf is the consumer group of a stage's router.
func RouterGroupOf(stage string) string { return "scheduler-router-" + stage }

// Metrics of the scheduler.
type Metrics struct {
	Routed *metrics.CounterVec // by stage and command
	// ChainCut counts changes routed to no stage: past MaxChain stage
	// results in a row.
	ChainCut  *metrics.CounterVec // by the stage not asked
	Processed *metrics.CounterVec // by stage and outcome
	Calls     *metrics.HistogramVec
	Fired     *metrics.Counter
	Lateness  *metrics.HistogramVec
	Pending   *metrics.Gauge
	// TimerRecords counts the scheduler.timers records the timer service
	// read (a restart on its store reads only what came after).
	TimerRecords *metrics.Counter
	// Loop counts the router's, workers' and timer service's records.
	Loop *streams.LoopMetrics
}

// NewMetrics registers the scheduler's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Routed: r.Counter("offerlog_scheduler_routed_total", "Commands the router sent, by stage and kind.", "stage", "kind"),
		ChainCut: r.Counter("offerlog_scheduler_chain_cut_total",
			"Changes not routed to a stage because they were made by MaxChain stage results in a row since an outside change.", "stage"),
		Processed:    r.Counter("offerlog_scheduler_processed_total", "Queue items by stage and outcome.", "stage", "outcome"),
		Calls:        r.Histogram("offerlog_scheduler_process_seconds", "Time of a stage's Process call.", metrics.LatencyBuckets, "stage"),
		Fired:        r.Counter("offerlog_scheduler_timers_fired_total", "Timers fired into their stage's queue.").With(),
		Lateness:     r.Histogram("offerlog_scheduler_timer_lateness_seconds", "How late timers fired.", metrics.LatencyBuckets, "stage"),
		Pending:      r.Gauge("offerlog_scheduler_timers_pending", "Timers the timer service holds.").With(),
		TimerRecords: r.Counter("offerlog_scheduler_timer_records_total", "scheduler.timers records the timer service read.").With(),
		Loop:         streams.NewLoopMetrics(r),
	}
}

type router struct {
	view   *table.View // the offers table: stages' private states
	stages []StageConfig
	impls  map[string]Stage
	prod   *kgo.Client
	m      *Metrics
	log    *slog.Logger
}

// run reads offers.events until ctx is done and routes each change to its
// stages: r has one stage, each stage a router of its own, so that a slow
// ShouldProcess of one stage never delays another's decisions.
func (r *router) run(ctx context.Context, kafka *streams.Cluster) error {
	group := RouterGroupOf(r.stages[0].Name)
	if err := inheritOffsets(ctx, kafka.Admin(), RouterGroup, group); err != nil {
		return err
	}
	return streams.RunLoop(ctx, streams.LoopConfig{Name: group, Cluster: kafka, Group: group, Topics: []string{topics.OffersEvents},
		DeadTopic: topics.SchedulerDead, Producer: r.prod, Logger: r.log, Metrics: r.m.Loop,
		Backoff: streams.Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second}, BatchHandler: r.batch})
}

// inheritOffsets commits to group, if it has no offsets yet, those of
// from: a new group takes over where the one it replaces stopped instead
// of reading the topic from its start.
func inheritOffsets(ctx context.Context, adm *kadm.Client, from, group string) error {
	have, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("offsets of %s: %w", group, err)
	}
	if err == nil && len(have.Offsets()) > 0 {
		return nil
	}
	old, err := adm.FetchOffsets(ctx, from)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("offsets of %s: %w", from, err)
	}
	if o := old.Offsets(); len(o) > 0 {
		if _, err := adm.CommitOffsets(ctx, group, o); err != nil {
			return fmt.Errorf("start %s at %s's offsets: %w", group, from, err)
		}
	}
	return nil
}

// batch routes a batch of a partition's changes, each offer once: its
// stages look at the offer as its last change left it, and are asked about
// every change of the batch that concerns them (Merge).
func (r *router) batch(ctx context.Context, b *streams.Batch) error {
	byOffer := map[string][]schemas.OfferEvent{}
	var order []string
	for _, rec := range b.Records {
		var ev schemas.OfferEvent
		if err := schemas.OfferEvents.Decode(rec.Value, &ev); err != nil {
			b.Dead(rec, fmt.Sprintf("undecodable offer event: %v", err))
			continue
		}
		if _, ok := byOffer[string(rec.Key)]; !ok {
			order = append(order, string(rec.Key))
		}
		byOffer[string(rec.Key)] = append(byOffer[string(rec.Key)], ev)
	}
	// routeConcurrency goroutines take the offers in turn: one per offer
	// grew a new stack for each.
	outs := make([][]*schemas.OfferCommand, len(order))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(routeConcurrency, len(order)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(order); i = int(next.Add(1) - 1) {
				outs[i] = r.route(ctx, byOffer[order[i]])
			}
		})
	}
	wg.Wait()
	return offers.SendCommands(ctx, r.prod, slices.Concat(outs...))
}

// routeConcurrency is how many offers a router decides on at once (their
// ShouldProcess calls in flight).
const routeConcurrency = 16

// Merge returns what a stage is asked about for evs, the changes of one
// offer in a batch, in log order: the offer as the last change left it,
// with the fields changed by every change that may be routed to the stage
// (neither the stage's own result nor past the chain bound, Cut), as an
// outside change; false if none may be. Routing the last change alone
// (until 0.5.0) lost the others': a CREATE and a moderation opinion in one
// batch asked a stage of fields [status] nothing.
func Merge(evs []schemas.OfferEvent, stage string) (schemas.OfferEvent, bool) {
	if len(evs) == 0 {
		return schemas.OfferEvent{}, false
	}
	out := evs[len(evs)-1]
	out.Changed, out.ByStage = nil, ""
	depth, ok := int32(MaxChain), false
	for i := range evs {
		ev := &evs[i]
		if ev.ByStage == stage || Cut(ev) {
			continue
		}
		ok = true
		depth = min(depth, ev.StageDepth)
		for _, f := range ev.Changed {
			if !slices.Contains(out.Changed, f) {
				out.Changed = append(out.Changed, f)
			}
		}
	}
	out.StageDepth = depth
	return out, ok
}

// route returns the commands of every stage of r for evs, the changes of
// one offer in a batch.
func (r *router) route(ctx context.Context, evs []schemas.OfferEvent) []*schemas.OfferCommand {
	var cmds []*schemas.OfferCommand
	for _, sc := range r.stages {
		ev, ok := Merge(evs, sc.Name)
		if !ok {
			if slices.ContainsFunc(evs, func(e schemas.OfferEvent) bool { return Cut(&e) }) {
				r.m.ChainCut.With(sc.Name).Inc()
			}
			continue
		}
		out := Route(sc, &ev, func() (Should, error) {
			cctx, cancel := context.WithTimeout(ctx, sc.Timeout)
			defer cancel()
			st, err := r.state(cctx, &ev, sc.Name)
			if err != nil {
				return Should{}, err
			}
			return r.impls[sc.Name].ShouldProcess(cctx, &ev.Offer, ev.Version, st)
		})
		for _, c := range out {
			r.m.Routed.With(sc.Name, string(c.Kind)).Inc()
		}
		cmds = append(cmds, out...)
	}
	return cmds
}

// state returns the stage's state as of the event: its private contents
// are not on offers.events, so they come from the offers view once it
// holds the event's state version (or a later one).
func (r *router) state(ctx context.Context, ev *schemas.OfferEvent, stage string) (schemas.StageState, error) {
	want := stageIn(ev.Stages, stage)
	rec, err := awaitRecord(ctx, r.view, ev.Offer.ID, func(rec *schemas.OfferRecord) bool {
		st, _ := offers.StageOf(rec, stage)
		return st.Version >= want.Version
	})
	if err != nil {
		return want, fmt.Errorf("state of %s for offer %s not in the view: %w", stage, ev.Offer.ID, err)
	}
	st, _ := offers.StageOf(rec, stage)
	want.TypeURL, want.Value = st.TypeURL, st.Value
	return want, nil
}

func stageIn(sts []schemas.StageState, stage string) schemas.StageState {
	for _, s := range sts {
		if s.Stage == stage {
			return s
		}
	}
	return schemas.StageState{Stage: stage}
}

// stateOf returns stage's part of the record r (the offers package's view).
func stateOf(r *schemas.OfferRecord, stage string) schemas.StageState {
	st, _ := offers.StageOf(r, stage)
	return st
}
