package streams

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A Cluster is one Kafka cluster as this process talks to it: its seed
// brokers, how to authenticate, the settings every client is built with,
// and one admin client shared by everything that only asks (offsets,
// partitions, topics). Build it once per process and cluster
// (NewCluster), pass it to what needs it, close it last. Every franz-go
// client of offerlog is made by a Cluster; there is no process-wide
// client state.
type Cluster struct {
	brokers  []string
	creds    *Credentials
	settings ClientSettings
	admCl    *kgo.Client
	adm      *kadm.Client
}

// ClientSettings are what every client of a Cluster is built with: how
// producers compress, the largest record they write, and the process's
// stable name in consumer groups.
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
	// Logger receives the clients' own warnings and errors (franz-go's);
	// nil: slog's default logger.
	Logger *slog.Logger
	// Peers are the other clusters this process talks to, each with its
	// own brokers and credentials (--peer-kafka-config): the numerator's
	// handover reads the other data centre's cluster, whose users are not
	// this one's. Other takes the peer whose brokers it is asked for.
	Peers []KafkaConfig
	// Dial, if set, opens every connection of the cluster's clients
	// instead of the system's dialer (tests put a network they can cut
	// between a member and its brokers: testkit.Link). A cluster of TLS
	// credentials cannot have one (franz-go takes a dialer or a TLS
	// configuration).
	Dial func(ctx context.Context, network, host string) (net.Conn, error)
}

// DefaultMaxRecordBytes is the default largest record: 1 MiB.
const DefaultMaxRecordBytes = 1 << 20

// Compressions are the codecs --compression takes.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// WithDefaults returns s with its zero fields set to their defaults, or an
// error for a compression offerlog does not know.
func (s ClientSettings) WithDefaults() (ClientSettings, error) {
	if s.Compression == "" {
		s.Compression = "none"
	}
	if _, err := kgoCodec(s.Compression); err != nil {
		return s, err
	}
	if s.MaxRecordBytes <= 0 {
		s.MaxRecordBytes = DefaultMaxRecordBytes
	}
	return s, nil
}

// NewCluster returns the cluster of brokers, spoken to with creds (nil:
// plaintext, no SASL) and settings s. It connects to nothing yet.
func NewCluster(brokers []string, creds *Credentials, s ClientSettings) (*Cluster, error) {
	if len(brokers) == 0 {
		return nil, fmt.Errorf("cluster: no brokers")
	}
	s, err := s.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if creds != nil {
		if err := creds.validate(); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c := *creds
		creds = &c
	}
	c := &Cluster{brokers: slices.Clone(brokers), creds: creds, settings: s}
	// Its metadata is cached for a quarter of a second, not franz-go's
	// 5 s: kadm caches a topic's absence too, so a topic listed before
	// it was created (topics.Ensure lists, then creates) was unknown to
	// every question for 5 s after (a cache server's start waited for it).
	if c.admCl, err = c.Client(kgo.ClientID("offerlog-admin"), kgo.MetadataMinAge(adminMetadataAge)); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.adm = kadm.NewClient(c.admCl)
	return c, nil
}

// Other returns the cluster of brokers (the other data centre's), spoken
// to with the credentials of the peer that names one of them
// (ClientSettings.Peers), else with c's; and c's settings. Close it when
// done.
func (c *Cluster) Other(brokers []string) (*Cluster, error) {
	creds := c.creds
	for _, p := range c.settings.Peers {
		if slices.ContainsFunc(brokers, func(b string) bool { return slices.Contains(p.Brokers, b) }) {
			creds = p.Credentials
			break
		}
	}
	return NewCluster(brokers, creds, c.settings)
}

// Brokers returns the cluster's seed brokers.
func (c *Cluster) Brokers() []string { return slices.Clone(c.brokers) }

// Settings returns the settings its clients are built with.
func (c *Cluster) Settings() ClientSettings { return c.settings }

// adminMetadataAge is how long the shared admin client trusts the metadata
// it cached.
const adminMetadataAge = 250 * time.Millisecond

// Admin returns the cluster's shared admin client. It is closed by Close:
// never close it, or its client, yourself.
func (c *Cluster) Admin() *kadm.Client { return c.adm }

// Forget drops what the shared admin client knows of topics: after a
// topic is deleted and made again (a repartition, a replay's table), the
// next question about it goes to the broker, not to an answer cached for
// up to adminMetadataAge, which would give the old partition count.
func (c *Cluster) Forget(topics ...string) { c.admCl.PurgeTopicsFromClient(topics...) }

// Close closes the shared admin client. Clients made by Client are their
// owners' to close.
func (c *Cluster) Close() { c.admCl.Close() }

// Options are the franz-go options of a client of the cluster: its seed
// brokers, credentials and settings, logging to the settings' Logger.
// For a client made without Client (the consume loop's).
func (c *Cluster) Options() []kgo.Opt {
	codec, _ := kgoCodec(c.settings.Compression)
	return append(c.ConnectOptions(), kgo.WithLogger(newKgoLogger(c.settings.Logger)),
		kgo.ProducerBatchCompression(codec), kgo.ProducerBatchMaxBytes(c.settings.MaxRecordBytes))
}

// ConnectOptions are the options that reach the cluster and no more: its
// seed brokers and credentials. A client of these is franz-go's own, as
// another program's would be (snappy batches, franz-go's limits): a test's
// bare client.
func (c *Cluster) ConnectOptions() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(c.brokers...)}
	if c.settings.Dial != nil {
		opts = append(opts, kgo.Dialer(c.settings.Dial))
	}
	if c.creds != nil {
		if c.creds.TLS != nil {
			opts = append(opts, kgo.DialTLSConfig(c.creds.TLS.Clone()))
		}
		if c.creds.sasl() {
			opts = append(opts, kgo.SASL(c.creds.mechanism()))
		}
	}
	return opts
}

// Client returns a new franz-go client of the cluster, then opts; the
// caller closes it.
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
func (c *Cluster) Client(opts ...kgo.Opt) (*kgo.Client, error) {
	all := append(c.Options(), kgo.AllowIdempotentProduceCancellation())
	return kgo.NewClient(append(all, opts...)...)
}

// Producer returns a client that produces with acks=all and no linger,
// for the commands, outputs and dead letters of the component name.
// extra options come last.
func (c *Cluster) Producer(name string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.ClientID("offerlog-" + name), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0)}
	return c.Client(append(opts, extra...)...)
}

// Transactional returns a producer whose records are written in
// transactions of id (acks all, as transactions need), then opts. It
// cannot take AllowIdempotentProduceCancellation (franz-go refuses it with
// a transactional id): its produces end when their transaction does.
func (c *Cluster) Transactional(name, id string, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append(c.Options(), kgo.ClientID("offerlog-"+name), kgo.TransactionalID(id), kgo.RequiredAcks(kgo.AllISRAcks()))
	return kgo.NewClient(append(all, opts...)...)
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

// kgoLogger hands franz-go's own warnings and errors (a broker refusing
// SASL, a produce failing for good, a group's heartbeats failing) to the
// cluster's logger (ClientSettings.Logger), with the client's key-value pairs as
// attributes. Below warn franz-go is too chatty for a component's log: a
// client's debugging needs --log-level debug and a client of its own.
// The level is read once, when the client is made: franz-go asks for it
// on its hot paths.
type kgoLogger struct {
	level kgo.LogLevel
	log   *slog.Logger
}

func newKgoLogger(log *slog.Logger) kgoLogger {
	if log == nil {
		log = slog.Default()
	}
	if log.Enabled(context.Background(), slog.LevelDebug) {
		return kgoLogger{kgo.LogLevelInfo, log}
	}
	return kgoLogger{kgo.LogLevelWarn, log}
}

func (l kgoLogger) Level() kgo.LogLevel { return l.level }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelWarn
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelInfo:
		l = slog.LevelInfo
	case kgo.LogLevelDebug:
		l = slog.LevelDebug
	}
	k.log.Log(context.Background(), l, "kafka client: "+msg, append([]any{"source", "franz-go"}, keyvals...)...)
}
