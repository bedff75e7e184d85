package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
)

// flags is a command's flag set whose flags default to OFFERLOG_<NAME>
// environment variables.
type flags struct {
	*flag.FlagSet
	logLevel  string
	logFormat string
	client    streams.ClientSettings
	// kafkaConfig is --kafka-config; brokerList is the command's --brokers.
	kafkaConfig string
	brokerList  *brokersFlag
	// creds are --kafka-config's credentials, nil for none; process is
	// the platform config of a command that runs components, which gets
	// them and the client settings once the flags are parsed.
	creds   *streams.Credentials
	process *platform.Config
	// positional are the arguments that are not flags, wherever they stood.
	positional []string
	// concerns names, for a flag that only some components read, those
	// components; component is the one "run COMPONENT" runs. --help on
	// run COMPONENT lists only the flags that concern it.
	concerns  map[string][]string
	component string
}

// concern records that the flags names are read only by components.
func (f *flags) concern(components []string, names ...string) {
	if f.concerns == nil {
		f.concerns = map[string][]string{}
	}
	for _, n := range names {
		f.concerns[n] = components
	}
}

// shown reports whether --help lists flag name.
func (f *flags) shown(name string) bool {
	cs, scoped := f.concerns[name]
	return f.component == "" || !scoped || slices.Contains(cs, f.component)
}

// usage prints the command's flags that concern it, as flag.PrintDefaults
// does, and how many others it takes.
func (f *flags) usage() {
	out := f.Output()
	fmt.Fprintf(out, "usage of offerlog %s:\n", f.Name())
	shown := flag.NewFlagSet(f.Name(), flag.ContinueOnError)
	shown.SetOutput(out)
	hidden := 0
	f.VisitAll(func(fl *flag.Flag) {
		if !f.shown(fl.Name) {
			hidden++
			return
		}
		shown.Var(fl.Value, fl.Name, fl.Usage)
		shown.Lookup(fl.Name).DefValue = fl.DefValue
	})
	shown.PrintDefaults()
	if hidden > 0 {
		fmt.Fprintf(out, "\n(%d flags of other components are accepted too; offerlog dev --help lists every flag)\n", hidden)
	}
}

func newFlags(name string, stderr io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &flags{FlagSet: fs}
	fs.Usage = f.usage
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.Func("log-format", "log format: text (key=value lines) or json (one object a line, for a log collector) (default text)", func(s string) error {
		if s != "text" && s != "json" {
			return fmt.Errorf("want text or json")
		}
		f.logFormat = s
		return nil
	})
	fs.StringVar(&f.kafkaConfig, "kafka-config", "", "librdkafka properties file of the cluster (bootstrap.servers, security.protocol, sasl.*), as kcat -F takes "+
		"(default: DATA/kafka.properties, which offerlog dev writes, if it exists)")
	return f
}

// produces adds the flags of a command that writes records: their
// compression and their largest batch.
func (f *flags) produces() *flags {
	f.StringVar(&f.client.Compression, "compression", "none", "compression of what this process produces: none, gzip, snappy, lz4 or zstd")
	return f.recordLimit()
}

// recordLimit adds --max-record-bytes: the largest batch a command writes,
// and the one the embedded broker takes.
func (f *flags) recordLimit() *flags {
	f.Func("max-record-bytes", fmt.Sprintf("largest record batch this process produces, and the embedded broker takes (default %d)",
		streams.DefaultMaxRecordBytes), func(s string) error {
		var n int32
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1024 {
			return fmt.Errorf("want an integer of at least 1024")
		}
		f.client.MaxRecordBytes = n
		return nil
	})
	return f
}

// parse applies environment defaults, then the command line.
func (f *flags) parse(args []string) error {
	var errs []string
	f.VisitAll(func(fl *flag.Flag) {
		env := "OFFERLOG_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fl.Value.Set(v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", env, v, err))
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", errUsage, strings.Join(errs, "; "))
	}
	// Flags may come before and after positional arguments
	// ("consume --brokers B TOPIC --from-beginning").
	for {
		if err := f.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return err
			}
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := f.FlagSet.Args()
		if len(rest) == 0 {
			// The Kafka clients' own lines go to the command's log.
			f.client.Logger = f.logger(f.Output())
			client, err := f.client.WithDefaults()
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			f.client = client
			if err := f.loadKafkaConfig(); err != nil {
				return err
			}
			if f.process != nil {
				f.process.Client, f.process.Credentials = f.client, f.creds
			}
			return nil
		}
		f.positional = append(f.positional, rest[0])
		args = rest[1:]
	}
}

// loadKafkaConfig applies --kafka-config: its credentials to the cluster
// this command talks to, and its bootstrap.servers when --brokers is not
// given. Without the flag, a command other than dev, broker and run reads
// DATA/kafka.properties (--data, else ./data) if it exists: the embedded
// broker's, so that the CLI works against offerlog dev as it is.
func (f *flags) loadKafkaConfig() error {
	path := f.kafkaConfig
	if path == "" {
		name := f.Name()
		if name == "dev" || name == "broker" || strings.HasPrefix(name, "run") {
			return nil
		}
		data := "./data"
		if fl := f.Lookup("data"); fl != nil {
			data = fl.Value.String()
		}
		path = filepath.Join(data, broker.PropertiesFile)
		if _, err := os.Stat(path); err != nil {
			return nil
		}
	}
	kc, err := streams.LoadKafkaConfig(path)
	if err != nil {
		return fmt.Errorf("%w: --kafka-config: %v", errUsage, err)
	}
	if f.brokerList != nil && len(*f.brokerList) == 0 {
		*f.brokerList = kc.Brokers
	}
	f.creds = kc.Credentials
	return nil
}

// NArg returns the number of positional arguments.
func (f *flags) NArg() int { return len(f.positional) }

// Arg returns positional argument i.
func (f *flags) Arg(i int) string { return f.positional[i] }

// Args returns the positional arguments.
func (f *flags) Args() []string { return f.positional }

// logger returns the command's logger (--log-level, --log-format).
func (f *flags) logger(w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if f.logFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h)
}

// brokersFlag is a comma-separated broker list.
type brokersFlag []string

func (b *brokersFlag) String() string { return strings.Join(*b, ",") }
func (b *brokersFlag) Set(s string) error {
	*b = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*b = append(*b, p)
		}
	}
	return nil
}

func (f *flags) brokers() *brokersFlag {
	b := &brokersFlag{}
	f.Var(b, "brokers", "comma-separated Kafka brokers (default: --kafka-config's bootstrap.servers)")
	f.brokerList = b
	if f.Lookup("data") == nil {
		f.String("data", "./data", "data directory whose kafka.properties (offerlog dev writes it) is read when no --kafka-config is given")
	}
	return b
}

func requireBrokers(b *brokersFlag) error {
	if len(*b) == 0 {
		return fmt.Errorf("%w: --brokers (or OFFERLOG_BROKERS) is required", errUsage)
	}
	return nil
}

// cluster returns the cluster of --brokers, with --kafka-config's
// credentials and the command's client settings: the one every client of
// the command is made by. Close it when done.
func (f *flags) cluster() (*streams.Cluster, error) {
	if err := requireBrokers(f.brokerList); err != nil {
		return nil, err
	}
	return streams.NewCluster(*f.brokerList, f.creds, f.client)
}

// platform adds the flags of a platform process to f and returns the
// config they fill: the rules (rules) and where it listens and what it
// talks to.
func (f *flags) platform() *platform.Config {
	cfg := f.rules()
	f.process = cfg
	f.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "HTTP address of the API and /metrics (empty: none)")
	f.StringVar(&cfg.PprofAddr, "pprof", "", "serve Go's profiling endpoints (/debug/pprof/) on this address, e.g. 127.0.0.1:6060 (empty: none)")
	f.StringVar(&cfg.GRPCAddr, "grpc", cfg.GRPCAddr, "gRPC address of the offer API, with the api component (empty: none)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate: serve HTTP, gRPC (and the embedded broker) over TLS only")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM key of --tls-cert")
	f.StringVar(&cfg.TLSCA, "tls-ca", "", "PEM file clients trust --tls-cert by (default: --tls-cert itself)")
	f.DurationVar(&cfg.InputRetention, "input-retention", 0, inputRetentionUsage)
	f.StringVar(&f.client.InstanceID, "instance-id", "", "this process's stable name in its consumer groups (static membership, KIP-345: a restart within the session "+
		"takes its partitions back without a rebalance), e.g. the pod's name; unique per process (empty: dynamic members)")
	f.BoolVar(&cfg.Insecure, "insecure", false, "turn authentication off: every caller may do everything (for experiments only)")
	cfg.Memory = platform.DefaultMemory
	f.Func("memory", fmt.Sprintf("memory budget of the process, e.g. 512MiB or 2GiB: half for the local table stores (Pebble), shared out evenly, the other half the Go runtime's soft limit (all of it for the cache and the sinks, which keep no stores, and in a binary built without cgo, whose stores are Go heap) (default %s)",
		platform.FormatMemory(platform.DefaultMemory)), func(s string) error {
		n, err := platform.ParseMemory(s)
		cfg.Memory = n
		return err
	})
	f.IntVar(&cfg.Limits.MaxConns, "max-conns", listener.DefaultLimits.MaxConns, "most connections served at once by each HTTP and gRPC listener; more wait")
	f.DurationVar(&cfg.Limits.ReadTimeout, "read-timeout", listener.DefaultLimits.ReadTimeout, "longest an HTTP client may take to send a whole request, body included")
	f.DurationVar(&cfg.SweepInterval, "sweep-interval", cfg.SweepInterval, "how often the registry looks for expired documents")
	f.DurationVar(&cfg.WaitTimeout, "wait-timeout", cfg.WaitTimeout, "longest wait for a verdict with ?wait=true, or for a group's answer to an offer API write")
	f.StringVar(&cfg.SearchAdvertise, "search-advertise", "", "the URL the API reaches this searcher at (http://HOST:PORT of its --http); the API finds the searcher's members by it in their consumer group")
	f.DurationVar(&cfg.SearchWait, "search-wait", cfg.SearchWait, "longest a search waits for the position it asks to read after (\"after\"), then answers 504")
	f.DurationVar(&cfg.ViewStaleness, "view-staleness", cfg.ViewStaleness, "how long a view may be behind its topic: the API answers 503 from a view further behind (or still catching up after a start), /readyz fails, and a view whose partition stands still that long behind its topic is restarted")
	f.StringVar(&cfg.ZooKeeper, "zookeeper", "", "ZooKeeper ensemble host:port,... of the numerator's coordinator, the cache's shard owners and the servers --reads cache asks (empty: in process, one master)")
	f.StringVar(&cfg.Numerator.Holder, "master", cfg.Numerator.Holder, "this numerator master's name in the coordinator")
	f.Func("peer-kafka-config", "librdkafka properties file of another data centre's cluster (its bootstrap.servers and its own credentials), "+
		"which the numerator's handover reads; repeat for more (default: this cluster's credentials)", func(file string) error {
		kc, err := streams.LoadKafkaConfig(file)
		if err != nil {
			return err
		}
		if len(kc.Brokers) == 0 {
			return fmt.Errorf("%s names no bootstrap.servers", file)
		}
		f.client.Peers = append(f.client.Peers, kc)
		return nil
	})
	f.DurationVar(&cfg.Numerator.LockTimeout, "lock-timeout", cfg.Numerator.LockTimeout, "longest a numerator master holds the write lock for one build")
	f.DurationVar(&cfg.Numerator.HandoverTimeout, "handover-timeout", cfg.Numerator.HandoverTimeout,
		"how long a numerator master tries to adopt another data centre's newer state before it declares that state invalid (its master did not hand it over)")
	f.DurationVar(&cfg.ZooKeeperSession, "session-timeout", 10*time.Second, "ZooKeeper session timeout of the numerator's coordinator: a killed master's lock is free this long after")
	f.StringVar(&cfg.Cache.Table, "table", cfg.Cache.Table, "the table topic the cache serves, or several comma-separated (one port; --reads cache needs offers-table,registry-table,offers.archive)")
	f.StringVar(&cfg.Cache.Addr, "cache-grpc", cfg.Cache.Addr, "gRPC address of the cache (run cache takes --grpc too)")
	f.StringVar(&cfg.Cache.DC, "dc", cfg.Cache.DC, "the data centre of the cache server, and of the API's reads through the cache (asked first)")
	f.StringVar(&cfg.Cache.Host, "host", cfg.Cache.Host, "the cache server's name in ZooKeeper (default: the hostname)")
	f.IntVar(&cfg.Cache.Shards, "shards", cfg.Cache.Shards, "how many shards the cache's table is cut into (more than 1 needs --zookeeper); "+
		"a data centre grows by starting the servers of a larger count beside the old ones, then stopping those")
	f.StringVar(&cfg.Cache.OnDisk, "cache-on-disk", cfg.Cache.OnDisk, "the tables (comma-separated) the cache keeps on disk under --data, not in memory: "+
		"a year of archived offers is far larger than the active ones and read far less (\"\": every table in memory)")
	f.IntVar(&cfg.Cache.Virtual, "virtual-shards", cfg.Cache.Virtual, "the cache cuts its tables by hash ranges of this many virtual shards "+
		"(each server reads every partition and keeps its range's keys; a data centre grows up to that many shards); 0 cuts by ranges of partitions, as before 0.5.0")
	f.BoolVar(&cfg.Standby, "standby", false, "keep warm copies of the table partitions other members of this process's groups own "+
		"(standby replicas: taking one over reads the changelog's tail, not the whole partition; costs the disk of every partition)")
	f.StringVar(&cfg.Reads, "reads", platform.ReadsView, "where the API reads offers and documents: view (a copy of the whole offers-table and registry-table in this process) "+
		"or cache (the serving cache's servers of those tables: --cache-hosts, else those in --zookeeper, else this process's cache)")
	f.Func("cache-hosts", "comma-separated cache servers that --reads cache asks (default: from --zookeeper)", func(s string) error {
		cfg.CacheHosts = strings.Split(s, ",")
		return nil
	})
	f.DurationVar(&cfg.CacheHedge, "cache-hedge", 50*time.Millisecond, "how long --reads cache waits for the cache servers of its own data centre (--dc) before asking the others; negative: ask every data centre at once (the seed's fan-out)")
	f.StringVar(&cfg.CacheToken, "cache-token", os.Getenv("OFFERLOG_CACHE_TOKEN"), "admin token --reads cache sends to the cache (default: $OFFERLOG_CACHE_TOKEN, else DATA/admin.token)")
	f.StringVar(&cfg.YDB, "ydb", "", "YDB DSN (grpc://host:2136/local) of the sinks; without it no sink runs")
	f.Func("source", "topic(s) the YDB sink follows, comma-separated (default: every topic it maps)", func(s string) error {
		cfg.SinkSources = strings.Split(s, ",")
		return nil
	})
	for name, components := range platform.FlagComponents() {
		f.concern(components, name)
	}
	return cfg
}

// rules adds the flags that decide what the processors do (and where their
// state is) to f: what a replay must be given as the processors ran.
func (f *flags) rules() *platform.Config {
	cfg := platform.DefaultConfig()
	f.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data directory (embedded broker data, local table state)")
	partitions := int(cfg.Partitions)
	f.Func("partitions", fmt.Sprintf("partitions of the catalogue's partitioned topics (default %d)", partitions), func(s string) error {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			return fmt.Errorf("want a positive integer")
		}
		cfg.Partitions = int32(n)
		return nil
	})
	f.Func("export-framing", "framing of the export topics (documents.results, offers.events, saas.*, yt.*): soe or confluent (default soe)",
		func(s string) error {
			fr, err := schemas.ParseFraming(s)
			cfg.ExportFraming = fr
			return err
		})
	f.DurationVar(&cfg.ArchiveAfter, "archive-after", cfg.ArchiveAfter,
		"how long an offer stays in offers-table once deleted, sold or expired before it moves to offers.archive (0: never); a replay needs the value the log was written with")
	f.IntVar(&cfg.Rules.MaxDocumentBytes, "max-document-bytes", cfg.Rules.MaxDocumentBytes, "largest accepted document, encoded")
	f.DurationVar(&cfg.Rules.TombstoneTTL, "tombstone-ttl", cfg.Rules.TombstoneTTL, "how long a delete blocks older versions")
	f.DurationVar(&cfg.EpochGrace, "epoch-grace", cfg.EpochGrace, "how long after its registration a new epoch makes older epochs stale")
	f.Int64Var(&cfg.Numerator.TTL, "ttl-generations", cfg.Numerator.TTL, "generations a key may go unseen before its doc_id is freed")
	f.Float64Var(&cfg.Numerator.RebuildShare, "rebuild-share", cfg.Numerator.RebuildShare, "share of holes in a shard that triggers a rebuild (0: never by itself)")
	f.Int64Var(&cfg.Numerator.Scheme, "scheme", cfg.Numerator.Scheme, "sharding scheme of a new numerator state")
	f.Int64Var(&cfg.Numerator.Type, "state-type", cfg.Numerator.Type, "T of the numerator's state version T.S.V.G")
	f.StringVar(&cfg.StagesFile, "stages", "", "YAML file of the scheduler's stages (default: the built-in expiry stage, 180 days)")
	return &cfg
}

const inputRetentionUsage = "retention of the topics replays read (documents.ingest, documents.changes, numerator.offers, offers.commands, photos.results, moderation.opinions, drafts.commands, cabinet.changes); 0 keeps them for ever, without which a replay after that long refuses"
