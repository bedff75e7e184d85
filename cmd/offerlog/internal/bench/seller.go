package bench

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// runSeller counts the cabinet of one seller of env.Offers offers (gost.md's
// largest sellers: about a million): their creations through the cabinet
// group, spread over offers.CabinetSpread keys as the aggregate writes them,
// then the same number on the one key every seller had before 0.5.0.
func runSeller(ctx context.Context, env *Env) (Result, error) {
	n := env.Offers
	ready := make(chan struct{})
	var once sync.Once
	cfg := cabinet.Config{Streams: table.Config{Cluster: env.Cluster, StateDir: env.StateDir, Replication: 1, Logger: env.Logger},
		OnReady: func() { once.Do(func() { close(ready) }) }}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cabinet.Run(ctx, cfg) }()
	defer func() { cancel(); <-done }()
	select {
	case <-ready:
	case err := <-done:
		return Result{}, fmt.Errorf("cabinet: %w", err)
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	measure := func(seller string, key func(id string) string) (Result, error) {
		start := time.Now()
		if err := writeCreations(ctx, env, seller, n, key); err != nil {
			return Result{}, err
		}
		if err := committedAll(ctx, env, string(cabinet.Group), topics.CabinetChanges); err != nil {
			return Result{}, err
		}
		return Result{Records: n, Duration: time.Since(start)}, nil
	}
	spread, err := measure("big", func(id string) string { return offers.CabinetKey("big", id) })
	if err != nil {
		return Result{}, err
	}
	one, err := measure("big-one-key", func(string) string { return "big-one-key" })
	if err != nil {
		return Result{}, err
	}
	// Both sellers count every offer, the spread one in its 10 parts.
	parts := map[string]*schemas.SellerCabinet{}
	err = streams.ReadToEnd(ctx, env.Cluster, string(topics.CabinetTable), func(r *kgo.Record) {
		var c schemas.SellerCabinet
		if schemas.SellerCabinets.Decode(r.Value, &c) == nil {
			parts[string(r.Key)] = &c
		}
	})
	if err != nil {
		return Result{}, err
	}
	merged := cabinet.Merge(parts)
	for _, s := range []string{"big", "big-one-key"} {
		if c := merged[s]; c == nil || c.Active != int64(n) {
			return Result{}, fmt.Errorf("seller %s counts %v active offers, want %d", s, c, n)
		}
	}
	spread.Note = fmt.Sprintf("one seller's %d offers created, counted over %d keys (produce and count, acks=all)", n, offers.CabinetSpread)
	one.Name, one.Note = "one-key", "the same on one key, as before 0.5.0"
	spread.Also = []Result{one}
	return spread, nil
}

// writeCreations appends n creations of seller's offers to cabinet.changes,
// keyed by key(offer id), as the aggregate writes them.
func writeCreations(ctx context.Context, env *Env, seller string, n int, key func(id string) string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	var mu sync.Mutex
	var first error
	for i := range n {
		id := offers.IDFrom(uint64(i))
		data, err := schemas.CabinetChanges.Encode(&schemas.CabinetChange{SellerID: seller, OfferID: id,
			SourceTopic: topics.OffersCommands, SourcePartition: 0, SourceOffset: int64(i),
			Before: schemas.Summary{Presets: []string{}}, After: schemas.Summary{Presets: []string{offers.PresetAll, offers.PresetActive}}})
		if err != nil {
			return err
		}
		cl.Produce(ctx, &kgo.Record{Topic: topics.CabinetChanges, Key: []byte(key(id)), Value: data}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return first
}
