package cabinet

import (
	"context"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Config of the cabinet group.
type Config struct {
	Streams table.Config
	Metrics *Metrics
	// OnReady, if set, is called when the group is processing.
	OnReady func()
}

func (c *Config) graph() *table.Graph {
	if c.Metrics == nil {
		c.Metrics = NewMetrics(metrics.New())
	}
	return Graph(c.Metrics)
}

// Run runs the cabinet group until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	return cfg.graph().Run(ctx, cfg.Streams, cfg.OnReady)
}

// Replay recounts every cabinet from cabinet.changes. The group must not
// be running.
func Replay(ctx context.Context, cfg Config, partitions int32, replication int16) error {
	return cfg.graph().Replay(ctx, cfg.Streams, topics.Find(string(Table), partitions).Configs(), partitions, replication)
}
