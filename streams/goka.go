package streams

import (
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/offerlog/offerlog/third_party/forked/goka"
	"github.com/offerlog/offerlog/third_party/forked/goka/storage"

	"github.com/offerlog/offerlog/schemas"
)

// Config is what every goka processor, view and emitter of one cluster
// shares. Build it once and pass it by value.
type Config struct {
	// Brokers are the seed brokers of the cluster.
	Brokers []string
	// StateDir holds goka's local table storage. It belongs to the cluster:
	// keep it beside the cluster's data, never in a directory shared with
	// another cluster's state.
	StateDir string
	// Replication of the topics goka creates itself; catalogue topics are
	// created by package topics beforehand.
	Replication int
	// AllowGaps makes replays rebuild from what retention left of their
	// inputs instead of refusing (Replay.AllowGaps).
	AllowGaps bool
	// Replaying is what a processor run by a replay does with the outputs
	// of input records the group had processed (ReplayOutputs); the zero
	// value is a live processor.
	Replaying ReplayOutputs
	// replay is set by Replay.For on the config of the processor a replay
	// runs.
	replay *replayRun
	// StoreMemory is the memory one local table store (one partition of
	// one table or view, Pebble) may take for its memtables and block
	// cache (default DefaultStoreMemory). Every store of a process gets the
	// same share of the process's budget (--memory).
	StoreMemory int64
	// Logger receives goka's own log lines at debug level.
	Logger *slog.Logger
}

// DefaultStoreMemory is a store's memory when its Config names none.
const DefaultStoreMemory = 8 << 20

// Validate returns every problem of c joined, or nil.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("streams: no brokers"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("streams: no state directory"))
	}
	if c.Replication < 1 {
		errs = append(errs, fmt.Errorf("streams: replication %d < 1", c.Replication))
	}
	return errors.Join(errs...)
}

// Sarama returns a fresh sarama configuration with offerlog's choices:
// inputs start at the oldest offset (so a new group, and a replay, sees every
// event), producers wait for all in-sync replicas and compress, and bound
// their records, as the process's ClientSettings say (no compression by
// default), like every franz-go client of offerlog.
func (c Config) Sarama(clientID string) *sarama.Config {
	cfg := goka.DefaultConfig()
	cfg.ClientID = clientID
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	// Never read records of aborted transactions (the numerator's sealer
	// writes its decisions transactionally).
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	// Commit often: after a crash, what came after the last commit is
	// processed again, and a value remembers its answers within
	// RememberWindow offsets (Remember) to answer it as the first time.
	cfg.Consumer.Offsets.AutoCommit.Interval = 250 * time.Millisecond
	// A member killed without leaving is dropped after its session (10 s,
	// sarama's default). A join waits for the rebalance, up to its
	// timeout: that must end before the request's read deadline
	// (Net.ReadTimeout, 30 s), or every join after a kill fails with an
	// i/o timeout and starts over (sarama's default is 60 s).
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	if id := Settings().InstanceID; id != "" {
		// Static membership needs JoinGroup v5 (Kafka 2.3).
		cfg.Version = sarama.V2_3_0_0
		cfg.Consumer.Group.InstanceId = id
	}
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = saramaCodec(Settings().Compression)
	cfg.Producer.MaxMessageBytes = int(Settings().MaxRecordBytes)
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Bytes = 1 << 20
	cfg.Producer.Partitioner = sarama.NewCustomPartitioner(
		sarama.WithAbsFirst(),
		sarama.WithCustomHashFunction(KafkaHasher()),
	)
	cfg.Producer.Idempotent = false
	cfg.Net.MaxOpenRequests = 5
	// sarama's defaults: a fetch of 1 MiB and 256 records buffered per
	// partition. offerlog had 4 MiB and 1 024: with goka's many partition
	// consumers in one process that held 200 MB of fetched records on the
	// heap, and GC, held at the memory limit, took 21 % of the offers
	// bench's CPU (11 % after; the writes' p99 70 → 30 ms, the load 2×
	// faster, goka's ceiling unchanged: docs/BENCHMARKS.md). The ?wait
	// answers these once seemed to lose were lost by the reply matcher
	// (streams.Replies), which the faster load filled: fixed there.
	cfg.Consumer.Fetch.Default = 1 << 20
	cfg.ChannelBufferSize = 256
	saramaSASL(cfg, c.Brokers)
	return cfg
}

func (c Config) topicManager(clientID string) goka.TopicManagerBuilder {
	tm := goka.NewTopicManagerConfig()
	tm.Table.Replication = c.Replication
	tm.Stream.Replication = c.Replication
	return goka.TopicManagerBuilderWithConfig(c.Sarama(clientID+"-topics"), tm)
}

func (c Config) producer(clientID string) goka.ProducerBuilder {
	cfg := c.Sarama(clientID)
	return func(brokers []string, id string, _ func() hash.Hash32) (goka.Producer, error) {
		cfg.ClientID = id
		return goka.NewProducer(brokers, cfg)
	}
}

// ProcessorOptions returns the options every processor of group is built
// with: offerlog's sarama config, Kafka-compatible key hashing and Pebble
// state under StateDir/processor/<group>.
func (c Config) ProcessorOptions(group goka.Group) []goka.ProcessorOption {
	id := "offerlog-" + string(group)
	opts := []goka.ProcessorOption{
		goka.WithClientID(id),
		goka.WithHasher(KafkaHasher()),
		goka.WithStorageBuilder(c.storage(c.StateDirOf(string(group)))),
		goka.WithTopicManagerBuilder(c.topicManager(id)),
		goka.WithConsumerGroupBuilder(goka.ConsumerGroupBuilderWithConfig(c.Sarama(id))),
		goka.WithConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(c.Sarama(id))),
		goka.WithProducerBuilder(c.producer(id)),
		goka.WithLogger(c.gokaLogger()),
		// A record with a null value is handed to the callback (nil), which
		// answers it like any undecodable one: goka's default drops it
		// without a trace.
		goka.WithNilHandling(goka.NilProcess),
	}
	if c.replay != nil {
		opts = append(opts, goka.WithContextWrapper(c.replay.wrap))
	}
	return opts
}

// ViewOptions returns the options of a view named name (its state lives in
// StateDir/view/<name>; two views of one table in a process need two names).
func (c Config) ViewOptions(name string) []goka.ViewOption {
	id := "offerlog-view-" + name
	return []goka.ViewOption{
		goka.WithViewClientID(id),
		goka.WithViewHasher(KafkaHasher()),
		goka.WithViewStorageBuilder(c.storage(filepath.Join(c.StateDir, "view", name))),
		goka.WithViewTopicManagerBuilder(c.topicManager(id)),
		goka.WithViewConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(c.Sarama(id))),
		goka.WithViewLogger(c.gokaLogger()),
		goka.WithViewAutoReconnect(),
	}
}

// storage returns the builder of goka's local table stores under dir:
// Pebble without its WAL (PebbleBuilder), each store within StoreMemory.
// (LevelDB's 32 MiB buffers per store made 3.4 GB of heap at start with
// about a hundred stores; its journal cost a write call per Set.) The
// stores of earlier releases, LevelDB's, were dir/<topic>.<partition>; the
// Pebble ones are under dir/pebble, and a LevelDB one left beside is
// removed when its Pebble one opens: the changelog restores it.
func (c Config) storage(dir string) storage.Builder {
	mem := c.StoreMemory
	if mem <= 0 {
		mem = DefaultStoreMemory
	}
	build := PebbleBuilder(filepath.Join(dir, "pebble"), mem, c.Logger)
	return func(topic string, partition int32) (storage.Storage, error) {
		_ = os.RemoveAll(filepath.Join(dir, fmt.Sprintf("%s.%d", topic, partition)))
		return build(topic, partition)
	}
}

// StoreMemoryOf returns each store's share of a process's memory budget
// given to its local table stores, for partitions partitions of tables
// tables and views.
func StoreMemoryOf(budget int64, tables, partitions int) int64 {
	if budget <= 0 || tables <= 0 || partitions <= 0 {
		return DefaultStoreMemory
	}
	return budget / int64(tables*partitions)
}

func (c Config) gokaLogger() goka.Logger {
	l := c.Logger
	if l == nil {
		l = slog.Default()
	}
	return gokaLogger{l.With("component", "goka")}
}

type gokaLogger struct{ l *slog.Logger }

func (g gokaLogger) Print(v ...any)                 { g.l.Debug(fmt.Sprint(v...)) }
func (g gokaLogger) Println(v ...any)               { g.l.Debug(fmt.Sprint(v...)) }
func (g gokaLogger) Printf(format string, v ...any) { g.l.Debug(fmt.Sprintf(format, v...)) }

// Avro is a goka.Codec over an Avro codec of package schemas. Decode returns
// a *T. Safe for concurrent use.
type Avro[T any] struct {
	C *schemas.Codec[T]
	// Framing of the values it encodes (default: single-object encoding);
	// it decodes both.
	Framing schemas.Framing
}

// Encode encodes a *T or a T; []byte is taken as already encoded, so a
// value written to a table and a topic is encoded once.
func (a Avro[T]) Encode(value any) ([]byte, error) {
	switch v := value.(type) {
	case []byte:
		return v, nil
	case *T:
		return a.C.EncodeFramed(v, a.Framing)
	case T:
		return a.C.EncodeFramed(&v, a.Framing)
	}
	return nil, fmt.Errorf("streams: codec of %s cannot encode %T", a.C.Schema().Name, value)
}

// Decode decodes data into a new *T.
func (a Avro[T]) Decode(data []byte) (any, error) {
	v := new(T)
	if err := a.C.Decode(data, v); err != nil {
		return nil, err
	}
	return v, nil
}

// Table is the goka codec of a group table's values: Avro, except that a
// value that does not decode (garbage written to the table topic) decodes
// to *Undecodable instead of an error, which would stop the processor at
// every message of that key, for ever. Read values with TableValue.
type Table[T any] struct{ C *schemas.Codec[T] }

// Undecodable is a table value that did not decode, and why.
type Undecodable struct {
	Data []byte
	Err  error
}

// Encode is Avro's.
func (t Table[T]) Encode(value any) ([]byte, error) { return Avro[T]{C: t.C}.Encode(value) }

// Decode returns a *T, or an *Undecodable.
func (t Table[T]) Decode(data []byte) (any, error) {
	v := new(T)
	if err := t.C.Decode(data, v); err != nil {
		return &Undecodable{Data: data, Err: err}, nil
	}
	return v, nil
}

// TableValue returns the value of the callback's key in its group table, nil
// if there is none. A value that does not decode is sent to dead as a dead
// letter of the table topic (key, bytes and reason, offset -1: goka does not
// tell where it was) and taken as absent: the message is handled as one for
// a new key, and the value it sets replaces the garbage. Call it once per
// callback.
func TableValue[T any](ctx goka.Context, dead goka.Stream) *T {
	switch v := ctx.Value().(type) {
	case *T:
		return v
	case *Undecodable:
		ctx.Emit(dead, ctx.Key(), NewDeadLetter(string(ctx.Group()), string(goka.GroupTable(ctx.Group())), ctx.Partition(), -1,
			[]byte(ctx.Key()), v.Data, ctx.Timestamp(), "undecodable table value, taken as absent: "+v.Err.Error()))
	}
	return nil
}

// Reassert sets v, the key's current value, again. A message processed
// again after a crash (its offset was not committed) finds in the local
// state what its first processing set, which may not have reached the table
// topic before the crash; a callback that recognises such a message, and
// answers it from the value, reasserts the value, so that the table topic
// ends with what the local state holds and a restore or a replay agrees with
// the answers given. Writing the current value again is harmless when it
// had reached the topic.
func Reassert[T any](ctx goka.Context, v *T) {
	if v != nil {
		ctx.SetValue(v)
	}
}

// RememberWindow is how far back in its input partition a table value
// remembers answers (Remember, RememberIn): a message processed again
// after a crash came after its input's last commit (goka commits every
// 250 ms; a table group's lost batch is at most a poll, 10 000 records),
// far less than this many offsets back. What a value keeps is a function
// of the log alone, so a replay writes the same value.
const RememberWindow = 40_000

// Remembered bounds the answers a value keeps, should one key get more
// messages than this within RememberWindow. (It was the whole rule, at
// 16: a key with more messages than that after the last commit was
// answered differently after a kill.)
const Remembered = 256

// RememberIn returns recent with next appended, without the entries
// stale reports (answers to messages of next's partition more than
// RememberWindow offsets before it), at most Remembered, the last. recent
// is not changed. The rule of Remember and of the registry's verdicts.
func RememberIn[T any](recent []T, next T, stale func(T) bool) []T {
	out := make([]T, 0, min(len(recent)+1, Remembered))
	for _, x := range recent {
		if !stale(x) {
			out = append(out, x)
		}
	}
	out = append(out, next)
	if len(out) > Remembered {
		out = slices.Clone(out[len(out)-Remembered:])
	}
	return out
}

// Stale reports whether a message at offset of a partition is more than
// RememberWindow offsets before newest, the offset of a message of the
// same partition.
func Stale(offset, newest int64) bool { return offset <= newest-RememberWindow }

// Remember returns recent with the answer r to the message at (r.Topic,
// r.Partition, r.Offset) appended, by the rule of RememberIn. A callback
// that writes a value remembers in it the answer it gives, so that the
// answer to a message processed again after a crash (Recall) comes from,
// and is persisted with, the value: it is the answer given the first time.
func Remember(recent []schemas.RecentResult, r schemas.RecentResult) []schemas.RecentResult {
	return RememberIn(recent, r, func(x schemas.RecentResult) bool {
		return x.Topic == r.Topic && x.Partition == r.Partition && Stale(x.Offset, r.Offset)
	})
}

// Recall returns the answer recent remembers for the message at (partition,
// offset), if the value was written by it: the message is processed again
// after a crash, and is to be answered as the first time, its value
// reasserted (Reassert).
func Recall(recent []schemas.RecentResult, partition int32, offset int64) (schemas.RecentResult, bool) {
	for _, r := range recent {
		if r.Partition == partition && r.Offset == offset {
			return r, true
		}
	}
	return schemas.RecentResult{}, false
}
