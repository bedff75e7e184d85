package numerator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Config of a numerator: the group, a view of its table and the sealer.
type Config struct {
	Streams     table.Config
	Coordinator coordinator.Coordinator
	// Holder names this master in the coordinator ("" is the host name
	// chosen by the caller).
	Holder       string
	Cluster      string
	Type, Scheme int64
	TTL          int64
	RebuildShare float64
	LockTimeout  time.Duration
	RetryEvery   time.Duration
	// HandoverTimeout is the sealer's (SealerConfig.HandoverTimeout).
	HandoverTimeout time.Duration
	// Hook is the sealer's (SealerConfig.Hook).
	Hook    func(ctx context.Context, at Point, ticket int64)
	Metrics *Metrics
	Logger  *slog.Logger
}

// DefaultConfig returns the numerator's defaults: type 0, scheme 0, keys
// expire after 10 unseen generations, a shard is rebuilt when half of it is
// holes, a build holds the lock for at most 10 minutes, a refused master
// asks again every 5 seconds, another data centre's state not handed over
// within 10 minutes is declared invalid, and the master is named after the host.
func DefaultConfig() Config {
	holder, err := os.Hostname()
	if err != nil || holder == "" {
		holder = "offerlog"
	}
	return Config{TTL: 10, RebuildShare: 0.5, LockTimeout: 10 * time.Minute, RetryEvery: 5 * time.Second,
		HandoverTimeout: DefaultHandoverTimeout, Holder: holder}
}

// Validate returns every problem of c joined.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Streams.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Coordinator == nil {
		errs = append(errs, errors.New("numerator: no coordinator"))
	}
	if c.TTL < 1 {
		errs = append(errs, fmt.Errorf("numerator: TTL of %d generations", c.TTL))
	}
	if c.RebuildShare < 0 || c.RebuildShare > 1 {
		errs = append(errs, fmt.Errorf("numerator: rebuild share %v outside [0, 1]", c.RebuildShare))
	}
	if c.LockTimeout <= 0 || c.RetryEvery <= 0 {
		errs = append(errs, errors.New("numerator: lock timeout and retry interval must be positive"))
	}
	return errors.Join(errs...)
}

// Run runs the numerator group, a view of its table and the sealer until
// ctx ends; it returns the first error that stopped one of them.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(metrics.New())
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	parts, err := streams.PartitionsOf(ctx, cfg.Streams.Cluster.Admin(), topics.NumeratorOffers)
	if err != nil {
		return fmt.Errorf("numerator: %w", err)
	}
	group := newGroup(cfg.Streams, cfg.Metrics, parts, cfg.Logger)
	view := table.NewView(cfg.Streams, Table, TableCodec, "numerator-sealer")
	// The view outlives the sealer, which reads it.
	return table.RunView(ctx, view, func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		run := func(i int, fn func(context.Context) error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if errs[i] = fn(ctx); errs[i] != nil {
					cancel()
				}
			}()
		}
		run(0, group.Run)
		run(1, func(ctx context.Context) error {
			select {
			case <-view.Ready():
			case <-ctx.Done():
				return nil
			}
			return RunSealer(ctx, SealerConfig{Kafka: cfg.Streams.Cluster, Cluster: cfg.Cluster, View: view,
				Coordinator: cfg.Coordinator, Holder: cfg.Holder, LockTimeout: cfg.LockTimeout, RetryEvery: cfg.RetryEvery,
				Type: cfg.Type, Scheme: cfg.Scheme, TTL: cfg.TTL, RebuildShare: cfg.RebuildShare, HandoverTimeout: cfg.HandoverTimeout,
				Hook: cfg.Hook, Metrics: cfg.Metrics, Logger: cfg.Logger})
		})
		wg.Wait()
		return errors.Join(errs...)
	})
}

// Replay rebuilds the numerator group's table and outputs from its inputs
// (numerator.offers and numerator.results): it empties the group's state
// (replay.Spec.Prepare) and runs the group alone, without the sealer,
// until it has committed every message that was there when the replay
// began. The decisions of past seals are in numerator.results, so the table
// ends as it was. The numerator must not be running.
func Replay(ctx context.Context, cfg Config, partitions int32, replication int16) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(metrics.New())
	}
	if err := cfg.Streams.Validate(); err != nil {
		return err
	}
	spec := replay.Spec{Group: Group, Table: Table, TableConfigs: topics.Find(string(Table), partitions).Configs(),
		Inputs: []string{topics.NumeratorOffers, topics.NumeratorResults}, Partitions: partitions, Replication: replication}
	return table.Replay(ctx, cfg.Streams, spec, func(ctx context.Context, s table.Config) error {
		return newGroup(s, cfg.Metrics, partitions, cfg.Logger).Run(ctx)
	})
}
