package platform

import (
	"context"
	"log/slog"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/sinks/ydbsink"
	"github.com/offerlog/offerlog/streams"
)

// runSinks starts one YDB sink per source topic.
func runSinks(ctx context.Context, sup *supervisor, cfg Config, kafka *streams.Cluster, reg *metrics.Registry, log *slog.Logger) error {
	db, err := ydbsink.OpenYDB(ctx, cfg.YDB)
	if err != nil {
		return err
	}
	sources := cfg.SinkSources
	if len(sources) == 0 {
		sources = ydbsink.SourceNames()
	}
	m := ydbsink.NewMetrics(reg)
	for _, src := range sources {
		sup.Go(ctx, ComponentSinkYDB+" "+src, true, func(ctx context.Context) error {
			return ydbsink.Run(ctx, ydbsink.Config{Cluster: kafka, Source: src, Store: db, Metrics: m, Logger: log})
		})
	}
	sup.Go(ctx, "ydb", false, func(ctx context.Context) error {
		<-ctx.Done()
		return db.Close(context.WithoutCancel(ctx))
	})
	return nil
}
