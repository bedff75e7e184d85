package bench

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/stagev1"
	"github.com/offerlog/offerlog/topics"
)

// markStage marks every offer with its attribute, once.
type markStage struct{ attr string }

func (s markStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: o.Attributes.Get(s.attr) == ""}, nil
}

func (s markStage) Process(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Result, error) {
	next := *o
	m := o.Attributes.Map()
	m[s.attr] = "1"
	next.Attributes = schemas.AttributesOf(m)
	return scheduler.Result{Offer: &next}, nil
}

// benchStages is how many stages the scheduler scenario runs (issue 18's
// target is stated for three).
const benchStages = 3

// runSchedulerBench loads env.Keys pending timers into the timer service,
// then runs the scheduler with three stages (external gRPC services in the
// process) on offers created at 5 000/s, while probe timers fire, and
// measures the stages' throughput and the timers' lateness.
func runSchedulerBench(ctx context.Context, env *Env) (Result, error) {
	n := env.Keys
	var stages scheduler.Config
	for i := range benchStages {
		// 64 calls in flight per stage: with 16 the figure was a stage's
		// max_parallelism over an item's latency (2.6-2.9 k results/s,
		// 1.5 of the 2 cores busy); from 64 on (4.1 k at 64 and at 128)
		// it is the scheduler's CPU. A stage's max_parallelism is what its
		// external service takes; the default is 4.
		stages.Stages = append(stages.Stages, scheduler.StageConfig{Name: fmt.Sprintf("bench-%c", 'a'+i), MaxParallelism: 64})
	}
	if _, err := topics.Ensure(ctx, env.Admin, -1, topics.ForStages(stages.Names(), nil, env.Partitions)); err != nil {
		return Result{}, err
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(200_000))
	if err != nil {
		return Result{}, err
	}
	defer prod.Close()
	timer := func(id, stage string, due time.Time) *kgo.Record {
		data, _ := schemas.StageTimers.Encode(&schemas.StageTimer{OfferID: id, Stage: stage, DueAt: due.UnixMilli()})
		return &kgo.Record{Topic: topics.SchedulerTimers, Key: []byte(id + "/" + stage), Value: data}
	}
	later := time.Now().Add(24 * time.Hour)
	for i := range n {
		prod.Produce(ctx, timer(offers.IDFrom(uint64(i)), "bench-a", later.Add(time.Duration(i)*time.Millisecond)), nil)
	}
	if err := prod.Flush(ctx); err != nil {
		return Result{}, err
	}

	// 1. The timer service alone takes the pending timers in: the whole
	// topic.
	total, err := recordsIn(ctx, env, topics.SchedulerTimers)
	if err != nil {
		return Result{}, err
	}
	m := scheduler.NewMetrics(metrics.New())
	tctx, cancel := context.WithCancel(ctx)
	// The platform's scheduler below keeps its timers in the same place and
	// resumes from this store.
	t := &scheduler.Timers{Cluster: env.Cluster, Dir: filepath.Join(env.StateDir, "state", "timers"), Prod: prod, Metrics: m, Logger: env.Logger}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- t.Run(tctx) }()
	for m.TimerRecords.Value() < uint64(total) {
		select {
		case err := <-done:
			cancel()
			return Result{}, fmt.Errorf("timer service stopped: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	pending := int(m.Pending.Value())
	loaded := Result{Name: "timers-load", Records: int(total), Duration: time.Since(start),
		Note: fmt.Sprintf("%d timer records read from scheduler.timers into the timer service's on-disk store, %d pending", total, pending)}
	cancel()
	<-done

	// 2. The scheduler with its stages, on offers created at 5 000/s,
	// while probe timers fire.
	for i := range stages.Stages {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return Result{}, err
		}
		g := grpc.NewServer()
		stagev1.RegisterStageServer(g, scheduler.Serve(markStage{attr: stages.Stages[i].Name}))
		go func() { _ = g.Serve(ln) }()
		defer g.Stop()
		stages.Stages[i].Address = ln.Addr().String()
	}
	cfg := platform.DefaultConfig()
	cfg.Insecure = true  // measured without auth; a token check is a map lookup and a SHA-256
	cfg.Memory = 1 << 30 // offerlog dev's default budget
	cfg.Brokers, cfg.Client, cfg.DataDir, cfg.HTTPAddr, cfg.GRPCAddr = env.Brokers, env.Cluster.Settings(), env.StateDir, "", ""
	cfg.Partitions, cfg.Logger, cfg.Stages = env.Partitions, env.Logger, stages
	cfg.Components = []string{platform.ComponentOffers, platform.ComponentScheduler}
	plat, err := startPlatform(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer plat.stop()

	offersN, probes := min(20_000, env.Docs), min(2_000, max(env.Docs/10, 10))
	run0 := time.Now()
	for i := range probes { // due over the next 8 s, for offers nobody has: their firing is what is measured
		prod.Produce(ctx, timer(fmt.Sprintf("probe-%d", i), "bench-b", run0.Add(2*time.Second+time.Duration(i)*8*time.Second/time.Duration(probes))), nil)
	}
	const rate = 5000
	for i := range offersN {
		if w := time.Until(run0.Add(time.Duration(i) * time.Second / rate)); w > 0 {
			time.Sleep(w)
		}
		id := offers.IDFrom(uint64(n + i))
		p := int64(1000 + i)
		data, err := schemas.OfferCommands.Encode(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: "bench",
			ExpectedVersion: -1, DraftID: id, Offer: benchOffer(i, p)})
		if err != nil {
			return Result{}, err
		}
		prod.Produce(ctx, &kgo.Record{Topic: topics.OffersCommands, Key: []byte(id), Value: data}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		return Result{}, err
	}
	sent := time.Since(run0)
	if err := plat.waitOrFail(ctx, env, int64(benchStages*offersN), topics.SchedulerEffects); err != nil {
		return Result{}, err
	}
	processed := Result{Name: "", Records: benchStages * offersN, Duration: time.Since(run0)}
	processed.Note = fmt.Sprintf("%d offers created at up to %d/s (sent in %s), each processed by %d external gRPC stages "+
		"(router, queue, worker, result saved by the aggregate), timed from the first offer sent to the last effect written, "+
		"with %d timers pending on disk", offersN, rate, sent.Round(time.Millisecond), benchStages, pending)

	// 3. Lateness of the probe timers: when their ENQUEUE was written.
	var lat []time.Duration
	recs, err := records(ctx, env, topics.OffersCommands)
	if err != nil {
		return Result{}, err
	}
	firings := map[string]int{}
	resultsSent := 0 // the workers' results, saved or discarded
	for _, r := range recs {
		var c schemas.OfferCommand
		if schemas.OfferCommands.Decode(r.Value, &c) != nil {
			continue
		}
		if c.Kind == schemas.CommandResult {
			resultsSent++
		}
		if c.FiredAt > 0 && c.Stage == "bench-b" {
			if firings[c.OfferID]++; firings[c.OfferID] == 1 {
				lat = append(lat, r.Timestamp.Sub(time.UnixMilli(c.FiredAt)))
			}
		}
	}
	// The three stages react to the same changes: the first result saved
	// changes the offer, and the others, read on the version before, are
	// discarded by the aggregate's compare-and-set and run again.
	processed.Note += fmt.Sprintf("; the workers sent %d results for the %d saved: the others were on a version another stage "+
		"had changed meanwhile, discarded by the aggregate and processed again", resultsSent, benchStages*offersN)
	duplicates := 0
	for _, k := range firings {
		duplicates += k - 1
	}
	lateness := Result{Name: "timer-lateness", Records: len(lat), Duration: 8 * time.Second, Latencies: lat}
	lateness.Note = fmt.Sprintf("%d probe timers due over 8 s while the stages worked, %d pending: lateness from due time to the "+
		"firing's ENQUEUE; max %s; fired twice %d, never fired %d", probes, pending, lateness.Percentile(100).Round(time.Millisecond),
		duplicates, probes-len(firings))
	processed.Also = []Result{loaded, lateness}
	return processed, nil
}
