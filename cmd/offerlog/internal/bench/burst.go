package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// burstProbes is how many probe timers of another stage the burst scenario
// has due, one every 10 ms (fewer for a small burst: the bench's own test).
const burstProbes = 1000

// runBurst loads env.Burst timers of one stage, all due in the same
// second, into the timer service, then lets that second come (the
// service's clock is moved to just before it) while probe timers of
// another stage fall due every 10 ms, and measures when each timer's
// ENQUEUE was written to offers.commands: the burst's span from its due
// second, how many fired twice or never, and the probes' lateness.
//
// It runs on a broker of its own: no aggregate removes its timers here,
// and the scheduler scenario's timer service, reading scheduler.timers
// from its start, carried them (a million more pending, the load's
// compactions in its lateness window: p99 128 ms alone, 814 ms after the
// burst); the later aggregates decided its million ENQUEUEs.
func runBurst(ctx context.Context, env *Env) (Result, error) {
	env, stop, err := onOwnBroker(ctx, env, filepath.Join(env.StateDir, "own"))
	if err != nil {
		return Result{}, err
	}
	defer stop()
	n := env.Burst
	nProbes := min(burstProbes, max(n/100, 10))
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(200_000))
	if err != nil {
		return Result{}, err
	}
	defer prod.Close()
	timer := func(id, stage string, due int64) *kgo.Record {
		data, _ := schemas.StageTimers.Encode(&schemas.StageTimer{OfferID: id, Stage: stage, DueAt: due})
		return &kgo.Record{Topic: topics.SchedulerTimers, Key: []byte(id + "/" + stage), Value: data}
	}
	// The burst is due in an hour by the wall clock, spread over one
	// second; the service's clock is moved there once it holds them all.
	due := time.Now().Add(time.Hour).Truncate(time.Second).UnixMilli()
	for i := range n {
		prod.Produce(ctx, timer(offers.IDFrom(uint64(i)), "burst", due+int64(i%1000)), nil)
	}
	if err := prod.Flush(ctx); err != nil {
		return Result{}, err
	}
	from, err := streams.EndOffsets(ctx, env.Admin, topics.OffersCommands)
	if err != nil {
		return Result{}, err
	}
	// The service has the burst once it read the topic to its end.
	total, err := recordsIn(ctx, env, topics.SchedulerTimers)
	if err != nil {
		return Result{}, err
	}
	var skew atomic.Int64 // the service's clock minus the wall clock
	m := scheduler.NewMetrics(metrics.New())
	t := &scheduler.Timers{Cluster: env.Cluster, Dir: filepath.Join(env.StateDir, "timers"), Prod: prod, Metrics: m, Logger: env.Logger,
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- t.Run(tctx) }()
	start := time.Now()
	for m.TimerRecords.Value() < uint64(total) {
		select {
		case err := <-done:
			return Result{}, fmt.Errorf("timer service stopped: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	loaded := time.Since(start)

	// Done when as many timers as the burst and the probes have fired
	// since.
	want := m.Pending.Value() - float64(n)
	// Half a second before the burst by the service's clock; the probes
	// fall due every 10 ms from the burst's second on.
	skew.Store(int64(time.Until(time.UnixMilli(due).Add(-500 * time.Millisecond))))
	for i := range nProbes {
		prod.Produce(ctx, timer(fmt.Sprintf("probe-%d", i), "probe", due+int64(i)*10), nil)
	}
	if err := prod.Flush(ctx); err != nil {
		return Result{}, err
	}
	for m.TimerRecords.Value() < uint64(total+int64(nProbes)) {
		select {
		case err := <-done:
			return Result{}, fmt.Errorf("timer service stopped: %w", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	for m.Pending.Value() > want {
		select {
		case err := <-done:
			return Result{}, fmt.Errorf("timer service stopped: %w", err)
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		return Result{}, err
	}

	// What was written: every ENQUEUE after the offsets of before.
	firings := map[string]int{}
	var last time.Time
	var probes []time.Duration
	var enqueues int
	ends, err := streams.EndOffsets(ctx, env.Admin, topics.OffersCommands)
	if err != nil {
		return Result{}, err
	}
	err = streams.ReadRange(ctx, env.Cluster, topics.OffersCommands, from, ends, func(r *kgo.Record) {
		var c schemas.OfferCommand
		if schemas.OfferCommands.Decode(r.Value, &c) != nil || c.Kind != schemas.CommandEnqueue || (c.Stage != "burst" && c.Stage != "probe") {
			return
		}
		enqueues++
		at := r.Timestamp.Add(time.Duration(skew.Load())) // by the service's clock
		if firings[c.OfferID+"/"+c.Stage]++; firings[c.OfferID+"/"+c.Stage] > 1 {
			return
		}
		switch c.Stage {
		case "burst":
			if at.After(last) {
				last = at
			}
		case "probe":
			probes = append(probes, at.Sub(time.UnixMilli(c.FiredAt)))
		}
	})
	if err != nil {
		return Result{}, err
	}
	twice := enqueues - len(firings)
	never := n + nProbes - len(firings)
	burst := Result{Name: "", Records: n, Duration: last.Sub(time.UnixMilli(due))}
	burst.Note = fmt.Sprintf("%d timers of one stage due in the same second (loaded into the service's store in %s), fired: "+
		"from their second to the last one's ENQUEUE written to offers.commands (the aggregate queues them at its command rate "+
		"after that); fired twice %d, never fired %d", n, loaded.Round(time.Millisecond), twice, never)
	probe := Result{Name: "probes", Records: len(probes), Duration: time.Duration(nProbes) * 10 * time.Millisecond, Latencies: probes}
	probe.Note = fmt.Sprintf("%d timers of another stage due every 10 ms from the burst's second: lateness from due time to "+
		"the ENQUEUE; max %s", nProbes, probe.Percentile(100).Round(time.Millisecond))
	burst.Also = []Result{probe}
	return burst, nil
}
