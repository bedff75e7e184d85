package ydbsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	ydbsdk "github.com/ydb-platform/ydb-go-sdk/v3"
	"github.com/ydb-platform/ydb-go-sdk/v3/query"
	"github.com/ydb-platform/ydb-go-sdk/v3/types"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Store is where rows go.
type Store interface {
	// Ensure creates the tables that are missing.
	Ensure(ctx context.Context, tables []Table) error
	// Write writes one table's rows (collapsed: one per key) or deletes
	// their keys, all or nothing.
	Write(ctx context.Context, t Table, rows []Row, deletes bool) error
}

// YDB is the Store of a YDB database.
type YDB struct{ db *ydbsdk.Driver }

// OpenYDB connects to the database of dsn (grpc://host:2136/local).
func OpenYDB(ctx context.Context, dsn string) (*YDB, error) {
	db, err := ydbsdk.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("ydb: open %s: %w", dsn, err)
	}
	return &YDB{db: db}, nil
}

// Close closes the connection.
func (y *YDB) Close(ctx context.Context) error { return y.db.Close(ctx) }

// Ensure creates the missing tables.
func (y *YDB) Ensure(ctx context.Context, tables []Table) error {
	for _, t := range tables {
		if err := y.db.Query().Exec(ctx, CreateSQL(t), query.WithIdempotent()); err != nil {
			return fmt.Errorf("ydb: create %s: %w", t.Name, err)
		}
	}
	return nil
}

// Write upserts the rows with the version rule, or deletes their keys, in
// one statement, retried by the SDK on transient errors (the statement is
// idempotent).
func (y *YDB) Write(ctx context.Context, t Table, rows []Row, deletes bool) error {
	cols, sql, param := t.Columns, UpsertSQL(t), "$rows"
	if deletes {
		cols, sql, param = t.keyColumns(), DeleteSQL(t), "$keys"
	}
	items := make([]types.Value, 0, len(rows))
	for _, r := range rows {
		fields := make([]types.StructValueOption, 0, len(cols))
		for _, c := range cols {
			v, err := ydbValue(c, r.Values[c.Name])
			if err != nil {
				return fmt.Errorf("ydb: %s.%s: %w", t.Name, c.Name, err)
			}
			fields = append(fields, types.StructFieldValue(c.Name, v))
		}
		items = append(items, types.StructValue(fields...))
	}
	err := y.db.Query().Exec(ctx, sql, query.WithIdempotent(),
		query.WithParameters(ydbsdk.ParamsBuilder().Param(param).BeginList().AddItems(items...).EndList().Build()))
	if err != nil {
		return fmt.Errorf("ydb: write %s: %w", t.Name, err)
	}
	return nil
}

// ydbValue converts a row value to the YDB value of column c.
func ydbValue(c Column, v any) (types.Value, error) {
	switch c.Type {
	case "Utf8":
		if s, ok := v.(string); ok {
			return types.TextValue(s), nil
		}
	case "String":
		if b, ok := v.([]byte); ok {
			return types.BytesValue(b), nil
		}
	case "Int32":
		if n, ok := v.(int32); ok {
			return types.Int32Value(n), nil
		}
	case "Int64":
		if n, ok := v.(int64); ok {
			return types.Int64Value(n), nil
		}
	case "Uint32":
		if n, ok := v.(uint32); ok {
			return types.Uint32Value(n), nil
		}
	case "Uint64":
		if n, ok := v.(uint64); ok {
			return types.Uint64Value(n), nil
		}
	case "Timestamp":
		if t, ok := v.(time.Time); ok {
			return types.TimestampValueFromTime(t), nil
		}
	}
	return nil, fmt.Errorf("%T is not a %s", v, c.Type)
}

// Metrics of a sink.
type Metrics struct {
	Rows    *metrics.CounterVec // by table and op (upsert, delete)
	Batches *metrics.Counter
	Errors  *metrics.Counter
	Seconds *metrics.HistogramVec
	// Loop counts the sink's records by outcome (dead letters included).
	Loop *streams.LoopMetrics
}

// NewMetrics registers a sink's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Rows:    r.Counter("offerlog_sink_rows_total", "Rows written by the YDB sink, by table and operation.", "table", "op"),
		Batches: r.Counter("offerlog_sink_batches_total", "Batches the YDB sink committed.").With(),
		Errors:  r.Counter("offerlog_sink_errors_total", "Failed batch writes, retried.").With(),
		Seconds: r.Histogram("offerlog_sink_batch_seconds", "Time to write a batch to YDB.", metrics.LatencyBuckets, "source"),
		Loop:    streams.NewLoopMetrics(r),
	}
}

// Config of a sink.
type Config struct {
	// Cluster is the cluster the source topic is read from.
	Cluster *streams.Cluster
	// Source is the topic followed (a key of Sources).
	Source  string
	Store   Store
	Metrics *Metrics
	Logger  *slog.Logger
	// Backoff bounds the waits between failed writes (1 s to MaxBackoff).
	MaxBackoff time.Duration
}

// Group returns the consumer group of the sink of source.
func Group(source string) string { return "sink-ydb-" + source }

// Run follows cfg.Source until ctx is done: each poll's records are mapped
// to rows, collapsed to the last row per key, written table by table, and
// their offsets committed only then. A failing write is retried with
// backoff for as long as it fails (nothing is skipped); a record that
// cannot be mapped goes to offers.dead with the reason.
func Run(ctx context.Context, cfg Config) error {
	src, ok := Sources[cfg.Source]
	if !ok {
		return fmt.Errorf("ydbsink: no mapping for topic %q (have %v)", cfg.Source, SourceNames())
	}
	if cfg.Store == nil {
		return errors.New("ydbsink: no store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(metrics.New())
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if err := cfg.Store.Ensure(ctx, src.Tables); err != nil {
		return err
	}
	tables := map[string]Table{}
	for _, t := range src.Tables {
		tables[t.Name] = t
	}
	// Nothing is skipped: a write that fails is retried until it succeeds
	// (or the component stops); only unmappable records go to offers.dead.
	return streams.RunLoop(ctx, streams.LoopConfig{Cluster: cfg.Cluster, Group: Group(cfg.Source), Topics: []string{cfg.Source},
		DeadTopic: topics.OffersDead, Logger: cfg.Logger, Metrics: cfg.Metrics.Loop,
		Backoff: streams.Backoff{Initial: time.Second, Max: cfg.MaxBackoff},
		BatchHandler: func(ctx context.Context, b *streams.Batch) error {
			var rows []Row
			for _, r := range b.Records {
				rs, err := src.Map(string(r.Key), r.Value)
				if err != nil {
					b.Dead(r, "unmappable: "+err.Error())
					continue
				}
				rows = append(rows, rs...)
			}
			start := time.Now()
			if err := writeOnce(ctx, cfg, tables, Collapse(tables, rows)); err != nil {
				cfg.Metrics.Errors.Inc()
				return fmt.Errorf("ydbsink %s: write: %w", cfg.Source, err)
			}
			cfg.Metrics.Seconds.With(cfg.Source).Observe(time.Since(start).Seconds())
			cfg.Metrics.Batches.Inc()
			return nil
		}})
}

func writeOnce(ctx context.Context, cfg Config, tables map[string]Table, rows []Row) error {
	for _, t := range tables {
		var ups, dels []Row
		for _, r := range rows {
			switch {
			case r.Table != t.Name:
			case r.Delete:
				dels = append(dels, r)
			default:
				ups = append(ups, r)
			}
		}
		for _, part := range []struct {
			rows []Row
			del  bool
			op   string
		}{{ups, false, "upsert"}, {dels, true, "delete"}} {
			if len(part.rows) == 0 {
				continue
			}
			if err := cfg.Store.Write(ctx, t, part.rows, part.del); err != nil {
				return err
			}
			cfg.Metrics.Rows.With(t.Name, part.op).Add(uint64(len(part.rows)))
		}
	}
	return nil
}
