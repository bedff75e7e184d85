package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Replaying is what `offerlog replay` hands a component's replay.
type Replaying struct {
	// Config is the platform's configuration the group ran with: rules,
	// stages, partitions, replication, the numerator's settings.
	Config Config
	// Streams is the replay's: brokers, local state, what it does with the
	// outputs of records handled before it (Replaying), the gap rule.
	Streams table.Config
	Logger  *slog.Logger
}

// ErrReemitRequired is what a replay of the indexer answers without
// --reemit: it has no table, its replay is the re-delivery.
var ErrReemitRequired = errors.New("the indexer has no table: its replay re-delivers every change to the client feeds; say so with --reemit")

// ErrNotReplayable is what Replay answers for a component without a group
// to rebuild.
var ErrNotReplayable = errors.New("not a group that replays")

// Replayable lists the components `offerlog replay` rebuilds, in the order
// to replay them in (the cabinet counts what the aggregate emits).
func Replayable() []string {
	var out []string
	for _, c := range components() {
		if c.replay != nil {
			out = append(out, c.Name)
		}
	}
	return out
}

// Replay rebuilds component name's group from its inputs (replay.Spec):
// the group must not be running.
func Replay(ctx context.Context, name string, r Replaying) error {
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	for _, c := range components() {
		if c.Name == name && c.replay != nil {
			if r.Config.Memory > 0 && r.Streams.StoreMemory == 0 {
				// The stores get the budget as the component's process
				// gives them (half, shared out among the partitions of
				// its tables): at the default 8 MiB a store, 2 MiB
				// memtables flushed and compacted one after another held
				// a replay of 5 M offers to 18 k commands/s.
				stores := max(storesOf(plan([]string{name}, false)), 1)
				r.Streams.StoreMemory = table.StoreMemoryOf(r.Config.Memory/2, stores, int(r.Config.Partitions))
				cache := table.NewBlockCache(table.CacheMemoryOf(r.Config.Memory/2, stores, int(r.Config.Partitions)))
				defer cache.Close()
				r.Streams.Cache = cache
			}
			return c.replay(ctx, r)
		}
	}
	return fmt.Errorf("%q: %w (replayable: %v)", name, ErrNotReplayable, Replayable())
}

// followEpochs returns the epoch catalogue, followed until stop is called.
func followEpochs(ctx context.Context, r Replaying) (epochs *registry.Catalogue, stop func()) {
	epochs = registry.NewCatalogue(r.Config.EpochGrace)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = epochs.Follow(fctx, r.Streams.Cluster, r.Logger) }()
	return epochs, func() { cancel(); <-done }
}

func replayRegistry(ctx context.Context, r Replaying) error {
	epochs, stop := followEpochs(ctx, r)
	defer stop()
	return registry.Replay(ctx, registry.Config{Streams: r.Streams, Rules: r.Config.Rules, Epochs: epochs, Framing: r.Config.ExportFraming,
		Logger: r.Logger}, r.Config.Partitions, r.Config.Replication)
}

func replayIndexer(ctx context.Context, r Replaying) error {
	if r.Streams.Replaying != replay.Reemit {
		return ErrReemitRequired
	}
	return indexer.Replay(ctx, indexer.Config{Cluster: r.Streams.Cluster, Partitions: r.Config.Partitions,
		Replication: r.Config.Replication, Framing: r.Config.ExportFraming, Logger: r.Logger, AllowGaps: r.Streams.AllowGaps})
}

func replayNumerator(ctx context.Context, r Replaying) error {
	c := r.Config.Numerator
	c.Streams, c.Logger = r.Streams, r.Logger
	return numerator.Replay(ctx, c, r.Config.Partitions, r.Config.Replication)
}

// replayOffers replays the aggregate with the stages it ran with: it
// decides stage commands only for configured stages, and their queues,
// which it writes, are made first (as the platform makes them).
func replayOffers(ctx context.Context, r Replaying) error {
	if err := r.Config.Validate(); err != nil {
		return err
	}
	if _, err := topics.Ensure(ctx, r.Streams.Cluster.Admin(), r.Config.Replication,
		topics.ForStages(r.Config.Stages.Names(), r.Config.Stages.PushTopics(), r.Config.Partitions)); err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	return offers.Replay(ctx, r.Config.offers(r.Streams), r.Config.Partitions, r.Config.Replication)
}
