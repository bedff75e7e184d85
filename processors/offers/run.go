package offers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Config of the offer aggregate.
type Config struct {
	Streams table.Config
	// Stages are the names of the configured stages (their queues are the
	// aggregate's outputs).
	Stages []string
	// Exclusive are the stages that never hold an offer together
	// (scheduler.StageConfig.Exclusive). A replay must be given those the
	// log was written with.
	Exclusive []string
	// Partitions of offers.commands: a command on another partition than
	// its key's is refused. 0: Run asks the broker.
	Partitions int32
	// Framing of offers.events, an export topic (default soe).
	Framing schemas.Framing
	// ArchiveAfter is how long an offer stays in offers-table once it is
	// deleted, sold or expired, before it moves to offers.archive; 0 means
	// DefaultArchiveAfter, a negative time never. A replay must be given
	// the time the log was written with to decide as it did.
	ArchiveAfter time.Duration
	Metrics      *Metrics
	// OnReady, if set, is called when the processor has recovered its table
	// and is processing.
	OnReady func()
	// OnAnswer, if set, is told every answer the aggregate gives, once
	// offers.results has acknowledged it: a process that runs the
	// aggregate and waits for its answers (the API, the feeds loader)
	// hands them to its matchers (streams.Replies.Deliver) without reading
	// them back from the topic. A replay gives none.
	OnAnswer func(schemas.OfferResult)
}

func (c *Config) graph() *table.Graph {
	if c.Metrics == nil {
		c.Metrics = NewMetrics(metrics.New())
	}
	after := c.ArchiveAfter
	switch {
	case after == 0:
		after = DefaultArchiveAfter
	case after < 0:
		after = 0
	}
	return newGraph(&handler{m: c.Metrics, stages: c.Stages, partitions: c.Partitions, onAnswer: c.OnAnswer, archiveAfter: after,
		exclusive: c.Exclusive}, c.Framing)
}

// Run runs the offer aggregate and its inbox (RunInbox) until ctx is
// done; it returns the first error that stopped one of them.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Streams.Validate(); err != nil {
		return err
	}
	log := cfg.Streams.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Partitions == 0 {
		n, err := streams.PartitionsOf(ctx, cfg.Streams.Cluster.Admin(), topics.OffersCommands)
		if err != nil {
			return fmt.Errorf("offers: %w", err)
		}
		cfg.Partitions = n
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inbox := make(chan error, 1)
	go func() {
		err := RunInbox(ctx, cfg.Streams.Cluster, log)
		if err != nil {
			cancel()
		}
		inbox <- err
	}()
	err := cfg.graph().Run(ctx, cfg.Streams, cfg.OnReady)
	cancel()
	return errors.Join(err, <-inbox)
}

// Replay rebuilds the aggregate's table from offers.commands (where the
// inbox brought photo results and opinions), and emits its outputs again (consumers of them
// are idempotent: the cabinet skips changes it applied, the compacted
// topics get the same values). The group must not be running.
func Replay(ctx context.Context, cfg Config, partitions int32, replication int16) error {
	cfg.Partitions = partitions
	return cfg.graph().Replay(ctx, cfg.Streams, topics.Find(string(Table), partitions).Configs(), partitions, replication)
}
