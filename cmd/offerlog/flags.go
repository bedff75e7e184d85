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
	"github.com/offerlog/offerlog/streams/component"
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
	// declared and readers are the components' flags (componentFlag).
	declared map[string]component.Flag
	readers  map[string][]string
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

// componentFlag defines the flag a component declares (component.Flag) as
// name, with the spec's usage and default, and binds it to p: a *bool,
// *string, *int, *int64, *float64, *time.Duration or a flag.Value. --help
// of run COMPONENT lists it only for the components that declare it.
func (f *flags) componentFlag(p any, name string) {
	if f.declared == nil {
		f.declared, f.readers = platform.ComponentFlags()
	}
	d, ok := f.declared[name]
	if !ok {
		panic(fmt.Sprintf("offerlog: flag --%s: no component declares it", name))
	}
	// Bound at the value p holds (the platform's default configuration's),
	// then set to the declared default, if any; zero is how the flag
	// package prints the type's zero value (no "(default ...)").
	zero := "0"
	switch p := p.(type) {
	case *bool:
		f.BoolVar(p, name, *p, d.Usage)
		zero = "false"
	case *string:
		f.StringVar(p, name, *p, d.Usage)
		zero = ""
	case *int:
		f.IntVar(p, name, *p, d.Usage)
	case *int64:
		f.Int64Var(p, name, *p, d.Usage)
	case *float64:
		f.Float64Var(p, name, *p, d.Usage)
	case *time.Duration:
		f.DurationVar(p, name, *p, d.Usage)
		zero = "0s"
	case flag.Value:
		f.Var(p, name, d.Usage)
		zero = ""
	default:
		panic(fmt.Sprintf("offerlog: flag --%s: cannot bind a %T", name, p))
	}
	fl := f.Lookup(name)
	fl.DefValue = zero
	if d.Default != "" {
		if err := fl.Value.Set(d.Default); err != nil {
			panic(fmt.Sprintf("offerlog: flag --%s: its declared default %q: %v", name, d.Default, err))
		}
		fl.DefValue = d.Default
	}
	f.concern(f.readers[name], name)
}

// funcValue is a flag.Value that calls itself with what it is set to, as
// flag.Func's.
type funcValue func(string) error

func (fn funcValue) Set(s string) error { return fn(s) }
func (fn funcValue) String() string     { return "" }

// commaList sets *p to a flag's comma-separated values, as given.
func commaList(p *[]string) funcValue {
	return func(s string) error {
		*p = strings.Split(s, ",")
		return nil
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
		data := platform.DefaultDataDir
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
		f.String("data", platform.DefaultDataDir, "data directory whose kafka.properties (offerlog dev writes it) is read when no --kafka-config is given")
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
	f.componentFlag(&cfg.GRPCAddr, "grpc")
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
	f.componentFlag(&cfg.SweepInterval, "sweep-interval")
	f.componentFlag(&cfg.WaitTimeout, "wait-timeout")
	f.componentFlag(&cfg.SearchAdvertise, "search-advertise")
	f.componentFlag(&cfg.SearchWait, "search-wait")
	f.componentFlag(&cfg.ViewStaleness, "view-staleness")
	f.componentFlag(&cfg.ZooKeeper, "zookeeper")
	f.componentFlag(&cfg.Numerator.Holder, "master")
	f.componentFlag(funcValue(func(file string) error {
		kc, err := streams.LoadKafkaConfig(file)
		if err != nil {
			return err
		}
		if len(kc.Brokers) == 0 {
			return fmt.Errorf("%s names no bootstrap.servers", file)
		}
		f.client.Peers = append(f.client.Peers, kc)
		return nil
	}), "peer-kafka-config")
	f.componentFlag(&cfg.Numerator.LockTimeout, "lock-timeout")
	f.componentFlag(&cfg.Numerator.HandoverTimeout, "handover-timeout")
	f.componentFlag(&cfg.ZooKeeperSession, "session-timeout")
	f.componentFlag(&cfg.Cache.Table, "table")
	f.componentFlag(&cfg.Cache.Addr, "cache-grpc")
	f.componentFlag(&cfg.Cache.DC, "dc")
	f.componentFlag(&cfg.Cache.Host, "host")
	f.componentFlag(&cfg.Cache.Shards, "shards")
	f.componentFlag(&cfg.Cache.OnDisk, "cache-on-disk")
	f.componentFlag(&cfg.Cache.Virtual, "virtual-shards")
	f.componentFlag(&cfg.Standby, "standby")
	f.componentFlag(&cfg.Reads, "reads")
	f.componentFlag(commaList(&cfg.CacheHosts), "cache-hosts")
	f.componentFlag(&cfg.CacheHedge, "cache-hedge")
	f.componentFlag(&cfg.CacheToken, "cache-token")
	f.componentFlag(&cfg.YDB, "ydb")
	f.componentFlag(commaList(&cfg.SinkSources), "source")
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
	f.componentFlag(funcValue(func(s string) error {
		fr, err := schemas.ParseFraming(s)
		cfg.ExportFraming = fr
		return err
	}), "export-framing")
	f.componentFlag(&cfg.ArchiveAfter, "archive-after")
	f.componentFlag(&cfg.Rules.MaxDocumentBytes, "max-document-bytes")
	f.componentFlag(&cfg.Rules.TombstoneTTL, "tombstone-ttl")
	f.componentFlag(&cfg.EpochGrace, "epoch-grace")
	f.componentFlag(&cfg.Numerator.TTL, "ttl-generations")
	f.componentFlag(&cfg.Numerator.RebuildShare, "rebuild-share")
	f.componentFlag(&cfg.Numerator.Scheme, "scheme")
	f.componentFlag(&cfg.Numerator.Type, "state-type")
	f.StringVar(&cfg.StagesFile, "stages", "", "YAML file of the scheduler's stages (default: the built-in expiry stage, 180 days)")
	return &cfg
}

const inputRetentionUsage = "retention of the topics replays read (documents.ingest, documents.changes, numerator.offers, offers.commands, photos.results, moderation.opinions, drafts.commands, cabinet.changes); 0 keeps them for ever, without which a replay after that long refuses"
