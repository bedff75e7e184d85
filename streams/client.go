package streams

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ClientSettings are what every Kafka client of this process is built
// with, whatever cluster it talks to: how producers compress, and the
// largest record they write. Set them once, at start (Configure).
type ClientSettings struct {
	// Compression of produced batches: none (the default), gzip, snappy,
	// lz4 or zstd. Consumers read every codec whatever this is.
	Compression string
	// MaxRecordBytes is the largest record batch a producer writes, and
	// what the embedded broker takes (message.max.bytes): one setting, so
	// that nothing offerlog writes is refused by its own broker
	// (default DefaultMaxRecordBytes).
	MaxRecordBytes int32
	// InstanceID is this process's stable name (a pod's name): every
	// consumer group it joins knows it by this group.instance.id (KIP-345
	// static membership), so a process that restarts within its session
	// takes its partitions back without a rebalance. Empty: dynamic
	// members, as Kafka's default. Two live processes must never share
	// one: the later fences the earlier.
	InstanceID string
}

// DefaultMaxRecordBytes is the default largest record: 1 MiB.
const DefaultMaxRecordBytes = 1 << 20

// Compressions are the codecs --compression takes.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

var settings atomic.Pointer[ClientSettings]

// Configure sets the process's client settings; call it before any
// client is made.
func Configure(s ClientSettings) error {
	if s.Compression == "" {
		s.Compression = "none"
	}
	if _, err := kgoCodec(s.Compression); err != nil {
		return err
	}
	if s.MaxRecordBytes <= 0 {
		s.MaxRecordBytes = DefaultMaxRecordBytes
	}
	settings.Store(&s)
	return nil
}

// Settings returns the process's client settings (defaults if never
// configured).
func Settings() ClientSettings {
	if s := settings.Load(); s != nil {
		return *s
	}
	return ClientSettings{Compression: "none", MaxRecordBytes: DefaultMaxRecordBytes}
}

func kgoCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want one of %v", name, Compressions)
}

// ClientOptions are the options of the process's settings for franz-go:
// compression (franz-go's own default is snappy) and the largest batch.
func ClientOptions() []kgo.Opt {
	s := Settings()
	codec, _ := kgoCodec(s.Compression)
	return []kgo.Opt{kgo.ProducerBatchCompression(codec), kgo.ProducerBatchMaxBytes(s.MaxRecordBytes)}
}

// NewClient returns a franz-go client of brokers with the process's
// settings, then opts. Every client of offerlog is made here.
//
// Its produces end with their context even when in flight
// (AllowIdempotentProduceCancellation): franz-go's idempotent producer
// otherwise waits for the broker's answer to a request it sent, however
// long, and a component stopping (or a loop giving up a partition) while
// the broker was unreachable waited for ever; the platform's shutdown hung
// in a test that kills the broker. The cost franz-go names, a record
// produced again by its caller landing twice, is one offerlog's consumers
// take anyway: every write is at least once, and every handler is
// idempotent.
func NewClient(brokers []string, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.AllowIdempotentProduceCancellation(), kgo.WithLogger(newKgoLogger())}, ClientOptions()...)
	all = append(all, clusterOptions(brokers)...)
	return kgo.NewClient(append(all, opts...)...)
}

// NewTransactional returns a franz-go producer of brokers with the
// process's settings whose records are written in transactions of id (acks
// all, as transactions need), then opts. It cannot take
// AllowIdempotentProduceCancellation (franz-go refuses it with a
// transactional id): its produces end when their transaction does.
func NewTransactional(brokers []string, name, id string, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.WithLogger(newKgoLogger()), kgo.ClientID("offerlog-" + name),
		kgo.TransactionalID(id), kgo.RequiredAcks(kgo.AllISRAcks())}, ClientOptions()...)
	all = append(all, clusterOptions(brokers)...)
	return kgo.NewClient(append(all, opts...)...)
}

// kgoLogger hands franz-go's own warnings and errors (a broker refusing
// SASL, a produce failing for good, a group's heartbeats failing) to the
// process's slog default logger, with the client's key-value pairs as
// attributes. Below warn franz-go is too chatty for a component's log: a
// client's debugging needs --log-level debug and a client of its own.
// The level is read once, when the client is made: franz-go asks for it
// on its hot paths.
type kgoLogger struct{ level kgo.LogLevel }

func newKgoLogger() kgoLogger {
	if slog.Default().Enabled(context.Background(), slog.LevelDebug) {
		return kgoLogger{kgo.LogLevelInfo}
	}
	return kgoLogger{kgo.LogLevelWarn}
}

func (l kgoLogger) Level() kgo.LogLevel { return l.level }

func (kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelWarn
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelInfo:
		l = slog.LevelInfo
	case kgo.LogLevelDebug:
		l = slog.LevelDebug
	}
	slog.Default().Log(context.Background(), l, "kafka client: "+msg, append([]any{"source", "franz-go"}, keyvals...)...)
}
