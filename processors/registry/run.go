package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Config of a registry processor.
type Config struct {
	Streams table.Config
	Rules   Rules
	// Epochs is the catalogue the registry decides with. The caller keeps it
	// following the epochs topic (Catalogue.Follow) for as long as Run runs.
	Epochs *Catalogue
	// SweepInterval is how often the table is scanned for due expiries;
	// 0 disables the sweep (documents still expire lazily when touched).
	SweepInterval time.Duration
	// Framing of the verdicts on documents.results (default soe).
	Framing schemas.Framing
	Metrics *Metrics
	Logger  *slog.Logger
	// OnReady, if set, is called when the processor has recovered its table
	// and is processing.
	OnReady func()
}

// Validate returns every problem of c joined, or nil.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Streams.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Epochs == nil {
		errs = append(errs, errors.New("registry: no epoch catalogue"))
	}
	if c.Rules.TombstoneTTL <= 0 {
		errs = append(errs, fmt.Errorf("registry: tombstone TTL %s must be positive", c.Rules.TombstoneTTL))
	}
	if c.Rules.MaxDocumentBytes <= 0 {
		errs = append(errs, fmt.Errorf("registry: max document size %d must be positive", c.Rules.MaxDocumentBytes))
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(metrics.New())
	}
}

// Run runs the registry processor until ctx is done. It first catches the
// epoch catalogue up to the end of the epochs topic, so that no document is
// judged by a catalogue that lags. It returns nil after a clean shutdown
// (processed messages committed), or the error that stopped it.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	adm := cfg.Streams.Cluster.Admin()
	if err := cfg.Epochs.Sync(ctx, adm); err != nil {
		return fmt.Errorf("registry: catch up epochs: %w", err)
	}
	ends, err := streams.EndOffsets(ctx, adm, topics.DocumentsIngest)
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	group := newGroup(cfg, true, int32(len(ends)))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sweep(runCtx, group, cfg)
	}()
	go func() {
		defer wg.Done()
		cfg.Epochs.KeepSynced(runCtx, adm, 100*time.Millisecond, cfg.Logger)
	}()
	err = group.Run(runCtx)
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// sweep runs the expiry sweep over the partitions the group holds every
// SweepInterval, while the group runs.
func sweep(ctx context.Context, group *table.Group, cfg Config) {
	if cfg.SweepInterval <= 0 {
		return
	}
	h := &handler{m: cfg.Metrics}
	t := time.NewTicker(cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n, err := group.Visit(ctx, func(key string, value []byte) []*kgo.Record { return h.sweep(now, key, value) })
			if err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("expiry sweep failed", "err", err)
				continue
			}
			cfg.Logger.Debug("expiry sweep done", "visited", n)
		}
	}
}

// ReplaySpec returns how to replay the registry: its input and its table.
func ReplaySpec(partitions int32, replication int16) replay.Spec {
	return replay.Spec{Group: Group, Inputs: []string{topics.DocumentsIngest}, Table: Table,
		TableConfigs: topics.Find(string(Table), partitions).Configs(), Partitions: partitions, Replication: replication}
}

// Replay rebuilds the registry's table (and, with cfg.Streams.Replaying =
// replay.Reemit, its outputs, marked) from documents.ingest:
// it empties the group's state (replay.Spec.Prepare), runs the processor
// without the expiry sweep until it has committed every message that was in
// the input when the replay began, and stops. The group must not be running.
func Replay(ctx context.Context, cfg Config, partitions int32, replication int16) error {
	cfg.SweepInterval = 0
	return table.Replay(ctx, cfg.Streams, ReplaySpec(partitions, replication), func(ctx context.Context, s table.Config) error {
		cfg.Streams = s
		return Run(ctx, cfg)
	})
}
