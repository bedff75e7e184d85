package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Config of a registry processor.
type Config struct {
	Streams streams.Config
	Rules   Rules
	// Epochs is the catalogue the registry decides with. The caller keeps it
	// following the epochs topic (Catalogue.Follow) for as long as Run runs.
	Epochs *Catalogue
	// SweepInterval is how often the table is scanned for due expiries;
	// 0 disables the sweep (documents still expire lazily when touched).
	SweepInterval time.Duration
	Metrics       *Metrics
	Logger        *slog.Logger
	// Ready, if set, is closed when the processor has recovered its table
	// and is processing.
	Ready chan<- struct{}
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Streams.Brokers...), kgo.ClientID("offerlog-registry-admin"))
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := cfg.Epochs.Sync(ctx, adm); err != nil {
		return fmt.Errorf("registry: catch up epochs: %w", err)
	}
	proc, err := goka.NewProcessor(cfg.Streams.Brokers, Graph(cfg.Epochs, adm, cfg.Rules, cfg.Metrics),
		cfg.Streams.ProcessorOptions(Group)...)
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch(runCtx, proc, cfg)
	}()
	err = proc.Run(runCtx)
	cancel()
	<-done
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// watch signals readiness and runs the expiry sweep while the processor
// runs.
func watch(ctx context.Context, proc *goka.Processor, cfg Config) {
	if err := proc.WaitForReadyContext(ctx); err != nil {
		return
	}
	if cfg.Ready != nil {
		close(cfg.Ready)
	}
	if cfg.SweepInterval <= 0 {
		return
	}
	t := time.NewTicker(cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n, err := proc.VisitAllWithStats(ctx, sweepVisitor, now)
			if err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("expiry sweep failed", "err", err)
				continue
			}
			cfg.Logger.Debug("expiry sweep done", "visited", n)
		}
	}
}

// ReplaySpec returns how to replay the registry: its input, its table and
// its local state.
func ReplaySpec(s streams.Config, partitions int32, replication int16) streams.Replay {
	var table topics.Topic
	for _, t := range topics.Catalogue(partitions) {
		if t.Name == string(Table) {
			table = t
		}
	}
	return streams.Replay{
		Group:        string(Group),
		Inputs:       []string{topics.DocumentsIngest},
		Table:        string(Table),
		TableConfigs: table.Configs(),
		Partitions:   partitions,
		Replication:  replication,
		StateDir:     s.StateDirOf(string(Group)),
	}
}

// Replay rebuilds the registry's table and outputs from documents.ingest:
// it empties the group's state (streams.Replay.Prepare), runs the processor
// without the expiry sweep until it has committed every message that was in
// the input when the replay began, and stops. The group must not be running.
func Replay(ctx context.Context, cfg Config, partitions int32, replication int16) error {
	cfg.setDefaults()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Streams.Brokers...), kgo.ClientID("offerlog-replay"))
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := ReplaySpec(cfg.Streams, partitions, replication).Prepare(ctx, adm)
	if err != nil {
		return err
	}
	cfg.SweepInterval = 0
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Run(runCtx, cfg) }()
	select {
	case err := <-errc:
		return fmt.Errorf("replay: processor stopped early: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	waitErr := WaitOrFail(ctx, adm, ends, errc)
	cancel()
	if runErr := <-errc; waitErr == nil && runErr != nil {
		return fmt.Errorf("replay: %w", runErr)
	}
	return waitErr
}

// WaitOrFail waits until the registry group has committed ends, or the
// processor stopped (its error arrives on errc, and is put back).
func WaitOrFail(ctx context.Context, adm *kadm.Client, ends kadm.Offsets, errc chan error) error {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- streams.WaitCommitted(waitCtx, adm, string(Group), ends) }()
	select {
	case err := <-waited:
		return err
	case err := <-errc:
		errc <- err
		if err == nil {
			err = errors.New("processor stopped")
		}
		return fmt.Errorf("replay: %w", err)
	}
}
