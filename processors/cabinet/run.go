package cabinet

import (
	"context"

	"github.com/offerlog/offerlog/third_party/forked/goka"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/streams"
)

// Config of the cabinet group.
type Config struct {
	Streams streams.Config
	Metrics *Metrics
	// OnReady, if set, is called when the processor is processing.
	OnReady func()
}

func (c *Config) graph() *goka.GroupGraph {
	if c.Metrics == nil {
		c.Metrics = NewMetrics(metrics.New())
	}
	return Graph(c.Metrics)
}

// Run runs the cabinet group until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	return streams.RunProcessor(ctx, cfg.Streams, cfg.graph(), cfg.OnReady)
}

// Replay recounts every cabinet from cabinet.changes. The group must not
// be running.
func Replay(ctx context.Context, cfg Config, partitions int32, replication int16) error {
	return streams.ReplayGroup(ctx, cfg.Streams, cfg.graph, partitions, replication)
}
