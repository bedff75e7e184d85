// Package broker runs offerlog's embedded Kafka-protocol broker: a
// franz-go kfake cluster that keeps its data in a directory, so topics,
// records and group offsets survive a restart.
package broker

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/offerlog/offerlog/third_party/forked/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/streams"
)

// Config of the embedded broker.
type Config struct {
	// DataDir keeps the broker's segments and offsets; "" keeps them in
	// memory only (tests).
	DataDir string
	// Addr is the host:port to listen on; port 0 picks a free one.
	Addr string
	// Partitions is the default partition count of auto-created topics.
	Partitions int
	// Fsync fsyncs every batch before it is acknowledged, for durability
	// across a power loss (Kafka's flush.messages=1). Without it a batch is
	// written to its segment file before the acknowledgement, which a
	// kill -9 of the process does not lose, and fsynced when its segment
	// rolls and on shutdown.
	Fsync bool
	// CompactEvery is how often compacted topics are compacted and
	// retention is applied; default 10 s.
	CompactEvery time.Duration
	// MaxRecordBytes is the largest record batch it takes
	// (message.max.bytes); default streams.DefaultMaxRecordBytes; give
	// it what the process's producers write at most.
	MaxRecordBytes int32
	// SASL makes the listener require SASL/SCRAM-SHA-512 of every client
	// and enforce ACLs, as Kafka's StandardAuthorizer does with
	// allow.everyone.if.no.acl.found=false: the user of
	// DataDir/kafka.properties (PropertiesFile) is the super user, a
	// librdkafka properties file written on the first start (mode 0600)
	// and rewritten with the listener's address on every start; the
	// users it creates (AlterUserScramCredentials) may do what their ACLs
	// allow (CreateAcls), both kept in the data directory.
	SASL bool
	// TLS, if set, makes the listener TLS only; CAFile is the PEM file
	// clients trust it by (the properties file names it).
	TLS    *tls.Config
	CAFile string
	// Logger receives the broker's warnings and errors.
	Logger *slog.Logger

	// onCompaction is called twice in each compaction of a partition by
	// the broker's rounds, off its loop: before it writes, and once it is
	// committed (tests: WithCompactionHook).
	onCompaction func(topic string, partition int32, committed bool)
}

// The broker's memory does not grow with its log (kfake patch 13): the
// per-batch indexes (72 bytes a batch) of sealed segments are a cache of
// about IndexCacheBatches batches, read again from the segment files when
// a fetch of old records needs them, and a segment is sealed at the latest
// RollEvery after its first batch. What is always in memory is the
// indexes of the active segments: at most RollEvery's batches. An hour of
// the soak had left 382 MB of indexes in the heap before.
const (
	IndexCacheBatches = 1 << 19 // about 38 MB
	RollEvery         = 10 * time.Minute
)

// PropertiesFile is the name of the embedded broker's librdkafka
// properties file in its data directory.
const PropertiesFile = "kafka.properties"

// Broker is a running embedded broker.
type Broker struct {
	cluster *kfake.Cluster
	unlock  func() // of its data directory
	creds   *streams.Credentials
}

// Credentials returns the credentials clients need, if SASL is on.
func (b *Broker) Credentials() (streams.Credentials, bool) {
	if b.creds == nil {
		return streams.Credentials{}, false
	}
	return *b.creds, true
}

// Start starts a broker. It returns an error if the address cannot be
// listened on or the data directory cannot be loaded.
func Start(cfg Config) (*Broker, error) {
	unlock := func() {}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.CompactEvery <= 0 {
		cfg.CompactEvery = 10 * time.Second
	}
	if cfg.MaxRecordBytes <= 0 {
		cfg.MaxRecordBytes = streams.DefaultMaxRecordBytes
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("broker: address %q: %w", cfg.Addr, err)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ClusterID("offerlog"),
		// kfake listens on 127.0.0.1; listen where we were asked instead.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, port))
		}),
		kfake.BrokerConfigs(map[string]string{
			"log.cleaner.backoff.ms": strconv.FormatInt(cfg.CompactEvery.Milliseconds(), 10),
			"message.max.bytes":      strconv.Itoa(int(cfg.MaxRecordBytes)),
			// Segments roll at least every RollEvery, so that what a
			// partition holds beyond that is in sealed segments, whose
			// indexes are a bounded cache (kfake patch 13).
			"log.roll.ms": strconv.FormatInt(RollEvery.Milliseconds(), 10),
		}),
		kfake.IndexCacheBatches(IndexCacheBatches),
	}
	if cfg.Fsync {
		opts = append(opts, kfake.SyncWrites())
	}
	if cfg.onCompaction != nil {
		opts = append(opts, kfake.CompactionHook(cfg.onCompaction))
	}
	if cfg.Partitions > 0 {
		opts = append(opts, kfake.DefaultNumPartitions(cfg.Partitions))
	}
	if cfg.Logger != nil {
		opts = append(opts, kfake.WithLogger(kfakeLogger{cfg.Logger.With("component", "broker")}))
	}
	if cfg.DataDir != "" {
		dir := filepath.Join(cfg.DataDir, "broker")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		u, err := LockDir(dir)
		if err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		unlock = u
		opts = append(opts, kfake.DataDir(dir))
	}
	var creds *streams.Credentials
	props := filepath.Join(cfg.DataDir, PropertiesFile)
	if (cfg.SASL || cfg.TLS != nil) && cfg.DataDir == "" {
		unlock()
		return nil, errors.New("broker: SASL and TLS keep their client properties in the data directory: give one")
	}
	if cfg.SASL {
		c, err := credentials(props)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("broker: %w", err)
		}
		creds = &c
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(c.Mechanism, c.User, c.Password), kfake.EnableACLs())
	}
	if cfg.TLS != nil {
		if creds == nil {
			creds = &streams.Credentials{}
		}
		ct, err := streams.ClientTLS(cfg.CAFile)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("broker: %w", err)
		}
		creds.TLS, creds.CAFile = ct, cfg.CAFile
		opts = append(opts, kfake.TLS(cfg.TLS))
	} else if creds != nil {
		creds.TLS, creds.CAFile = nil, "" // the properties may say TLS from an earlier start
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("broker: start: %w", err)
	}
	b := &Broker{cluster: c, unlock: unlock, creds: creds}
	if creds != nil {
		if err := streams.WriteKafkaConfig(props, b.Addrs(), *creds); err != nil {
			b.Close()
			return nil, fmt.Errorf("broker: %w", err)
		}
	}
	return b, nil
}

// Addrs returns the addresses the broker listens on.
func (b *Broker) Addrs() []string { return b.cluster.ListenAddrs() }

// Compact compacts the compacted topics and applies retention now.
func (b *Broker) Compact() { b.cluster.Compact() }

// ControlKey runs fn on the broker's requests of kind key before it
// handles them, for fault injection in tests (kfake's control functions:
// fn answers a request by returning true, and handles one request unless
// it calls KeepControl).
func (b *Broker) ControlKey(key int16, fn func(kmsg.Request) (kmsg.Response, error, bool)) {
	b.cluster.ControlKey(key, fn)
}

// KeepControl keeps the running control function for further requests.
func (b *Broker) KeepControl() { b.cluster.KeepControl() }

// DropControl drops the running control function after this request.
func (b *Broker) DropControl() { b.cluster.DropControl() }

// SleepControl, called from a control function, holds the request it
// controls (unanswered, the broker serving others) until wakeup returns
// (kfake's SleepControl).
func (b *Broker) SleepControl(wakeup func()) { b.cluster.SleepControl(wakeup) }

// Close stops the broker and flushes its data to disk.
func (b *Broker) Close() {
	b.cluster.Close()
	b.unlock()
}

type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, msg string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		k.l.Error(fmt.Sprintf(msg, args...))
	case kfake.LogLevelWarn:
		k.l.Warn(fmt.Sprintf(msg, args...))
	}
}

// credentials returns the credentials of the properties file at path, or
// new ones (user offerlog, a random password) if there is none yet.
func credentials(path string) (streams.Credentials, error) {
	// Only a missing file makes new credentials (a CA file it names that
	// is missing is an error, not a reason to forget the user).
	if _, err := os.Stat(path); err == nil {
		kc, err := streams.LoadKafkaConfig(path)
		if err != nil {
			return streams.Credentials{}, err
		}
		if kc.Credentials != nil && kc.Credentials.Mechanism != "" {
			return *kc.Credentials, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return streams.Credentials{}, err
	}
	var pw [24]byte
	if _, err := rand.Read(pw[:]); err != nil {
		return streams.Credentials{}, err
	}
	return streams.Credentials{Mechanism: "SCRAM-SHA-512", User: "offerlog", Password: base64.RawURLEncoding.EncodeToString(pw[:])}, nil
}
