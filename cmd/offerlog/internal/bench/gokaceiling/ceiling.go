// Package gokaceiling is the goka processor `make bench` measures beside
// offerlog's own (the ceiling of one-message-at-a-time processing on goka
// and sarama), with the goka configuration offerlog's processors had
// before they moved to the table runtime: sarama's settings below, Kafka's
// key hashing and Pebble stores. It is built into a binary of its own,
// cmd/goka-ceiling of the bench module, so that the offerlog binary links one Kafka client.
package gokaceiling

import (
	"context"
	"fmt"
	"hash"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"

	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
)

// Group is the ceiling processor's group.
const Group goka.Group = "bench-goka"

// Sarama returns the sarama configuration of the ceiling's clients: inputs
// from the oldest offset, producers waiting for all in-sync replicas,
// commits every 250 ms, fetches of 1 MiB and 256 records buffered per
// partition (offerlog's choices for its goka processors, measured in
// docs/BENCHMARKS.md).
func Sarama(clientID string) *sarama.Config {
	cfg := goka.DefaultConfig()
	cfg.ClientID = clientID
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Offsets.AutoCommit.Interval = 250 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = sarama.CompressionNone
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Bytes = 1 << 20
	cfg.Producer.Partitioner = sarama.NewCustomPartitioner(sarama.WithAbsFirst(), sarama.WithCustomHashFunction(streams.KafkaHasher()))
	cfg.Producer.Idempotent = false
	cfg.Net.MaxOpenRequests = 5
	cfg.Consumer.Fetch.Default = 1 << 20
	cfg.ChannelBufferSize = 256
	return cfg
}

// Options returns the options of a processor of group with its state under
// stateDir.
func Options(group goka.Group, stateDir string, log *slog.Logger) []goka.ProcessorOption {
	id := "offerlog-" + string(group)
	tm := goka.NewTopicManagerConfig()
	tm.Table.Replication, tm.Stream.Replication = 1, 1
	build := PebbleBuilder(filepath.Join(stateDir, "processor", string(group), "pebble"), table.DefaultStoreMemory, log)
	return []goka.ProcessorOption{
		goka.WithClientID(id),
		goka.WithHasher(streams.KafkaHasher()),
		goka.WithStorageBuilder(func(topic string, partition int32) (storage.Storage, error) { return build(topic, partition) }),
		goka.WithTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(Sarama(id+"-topics"), tm)),
		goka.WithConsumerGroupBuilder(goka.ConsumerGroupBuilderWithConfig(Sarama(id))),
		goka.WithConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(Sarama(id))),
		goka.WithProducerBuilder(func(brokers []string, clientID string, _ func() hash.Hash32) (goka.Producer, error) {
			return goka.NewProducer(brokers, Sarama(clientID))
		}),
		goka.WithLogger(logger{log}),
		goka.WithNilHandling(goka.NilProcess),
	}
}

// Run runs the ceiling processor until ctx ends: it counts per key in its
// table and emits each record of source to out as it is.
func Run(ctx context.Context, brokers []string, stateDir, source, out string, log *slog.Logger) error {
	graph := goka.DefineGroup(Group,
		goka.Input(goka.Stream(source), new(codec.Bytes), func(ctx goka.Context, msg any) {
			var n int64
			if v, ok := ctx.Value().(int64); ok {
				n = v
			}
			ctx.SetValue(n + 1)
			ctx.Emit(goka.Stream(out), ctx.Key(), msg)
		}),
		goka.Persist(new(codec.Int64)),
		goka.Output(goka.Stream(out), new(codec.Bytes)),
	)
	proc, err := goka.NewProcessor(brokers, graph, Options(Group, stateDir, log)...)
	if err != nil {
		return fmt.Errorf("goka ceiling: %w", err)
	}
	return proc.Run(ctx)
}

// logger hands goka's log lines to slog at debug level.
type logger struct{ l *slog.Logger }

func (g logger) Print(v ...any)                 { g.l.Debug(fmt.Sprint(v...)) }
func (g logger) Println(v ...any)               { g.l.Debug(fmt.Sprint(v...)) }
func (g logger) Printf(format string, v ...any) { g.l.Debug(fmt.Sprintf(format, v...)) }
