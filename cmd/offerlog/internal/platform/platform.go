// Package platform wires offerlog's components into one process: the
// embedded broker (when no brokers are given), the topic catalogue, and the
// components of the one list in components.go (the processor groups, their
// views, the serving cache, the API, the sinks, the lag), each with what it
// needs started before it. `offerlog dev` runs all of them; `offerlog run
// COMPONENT` runs one against a real cluster; `offerlog replay GROUP`
// rebuilds a group (Replay).
package platform

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/sinks/ydbsink"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Config of a platform process.
type Config struct {
	// Brokers of an existing cluster; empty starts the embedded broker on
	// KafkaAddr with its data under DataDir/broker.
	Brokers   []string
	KafkaAddr string
	// Credentials are how the process authenticates to the cluster of
	// Brokers (nil: plaintext); the embedded broker's own when it runs
	// one. Client are the settings of every client it makes.
	Credentials *streams.Credentials
	Client      streams.ClientSettings
	// Fsync makes the embedded broker fsync every batch before its
	// acknowledgement (broker.Config.Fsync).
	Fsync bool
	// DataDir holds the embedded broker's data and the local table state
	// (DataDir/state).
	DataDir string
	// HTTPAddr serves the API and /metrics; "" serves nothing.
	HTTPAddr string
	// PprofAddr, if set, serves Go's profiling endpoints (/debug/pprof/)
	// there, apart from the API: keep it on loopback.
	PprofAddr string
	// GRPCAddr serves the offer API over gRPC with the api component; ""
	// serves nothing.
	GRPCAddr string
	// Insecure turns authentication off: every caller of every route may
	// do everything, and the embedded broker takes any client. Without it,
	// callers need a token (package auth), the embedded broker's first
	// start writes an admin token to DataDir/admin.token, and the embedded
	// broker requires SASL/SCRAM-SHA-512 with the credentials of
	// DataDir/kafka.properties.
	Insecure bool
	// TLSCert and TLSKey, if set, serve HTTP, gRPC and the embedded broker
	// over TLS only; TLSCA is the PEM file clients trust them by (default
	// TLSCert: a self-signed certificate).
	TLSCert, TLSKey, TLSCA string
	// Memory is the process's memory budget: half of it goes to the local
	// table stores, shared out evenly (table.Config.StoreMemory); 0 keeps
	// each store at table.DefaultStoreMemory.
	Memory int64
	// Limits bound the HTTP and gRPC listeners (connections, timeouts,
	// message sizes); zero fields take listener.DefaultLimits.
	Limits listener.Limits
	// Components to run; empty runs all.
	Components []string
	// ExportFraming is the framing of the export topics (documents.results,
	// offers.events, saas.<client>, yt.<client>): soe (default) or
	// confluent. Every topic is read in both.
	ExportFraming schemas.Framing
	// Standby makes this process's table groups keep warm copies of the
	// partitions other members own (table.Config.Standby): a failover
	// reads the changelog's tail, not the partitions whole.
	Standby bool
	// ArchiveAfter is how long an offer stays in offers-table once it is
	// deleted, sold or expired before it moves to offers.archive (0:
	// never). A replay of the offers must be given the time the log was
	// written with.
	ArchiveAfter time.Duration
	// Partitions of the catalogue's partitioned topics; Replication of the
	// topics created (-1: the broker's default).
	Partitions  int32
	Replication int16
	// InputRetention is the retention of the topics replays read that are
	// not compacted (topics.ReplayInputs); 0 keeps them for ever.
	InputRetention time.Duration
	Rules          registry.Rules
	EpochGrace     time.Duration
	// SweepInterval of the registry's expiry sweep.
	SweepInterval time.Duration
	WaitTimeout   time.Duration
	// ViewStaleness bounds how long a view the API reads from may be
	// behind its topic and still answer (503 past it), how long any view
	// may be before /readyz fails, and how long a view's partition behind
	// its topic may stand still before the view is restarted.
	ViewStaleness time.Duration
	// SearchWait bounds how long a search waits for the position it asks
	// to read after (search.DefaultWait).
	SearchWait time.Duration
	// SearchAdvertise is the URL a searcher member is reached at by the
	// API (its --http, as others reach it); empty: the API of its own
	// process only.
	SearchAdvertise string
	// Numerator configures the numerator (its Streams, Coordinator and
	// Logger are filled in by Run).
	Numerator numerator.Config
	// ZooKeeper ("host:port,...") holds the numerator's coordinator and the
	// cache's shard ownership; "" keeps both in process, which is right only
	// with a single master and a single cache server per table.
	ZooKeeper string
	// ZooKeeperSession is the numerator's ZooKeeper session timeout: a
	// killed master's lock is free this long after its death.
	ZooKeeperSession time.Duration
	// Cache configures the cache component.
	Cache CacheConfig
	// Reads is where the offer API reads offers: ReadsView (a view of the
	// whole offers-table in this process) or ReadsCache (through the
	// serving cache's servers of offers-table: CacheHosts, else those
	// registered in ZooKeeper, else this process's own cache component).
	// CacheToken is the admin token the reads send when auth is on
	// (default: DataDir/admin.token).
	Reads      string
	CacheHosts []string
	CacheToken string
	// CacheHedge is how long the reads wait for the cache servers of their
	// data centre (Cache.DC) before asking the others (serving.ClientConfig.Hedge).
	CacheHedge time.Duration
	// Stages are the scheduler's stages (the offers component declares
	// their queues too); StagesFile, if set, is read into Stages.
	Stages     scheduler.Config
	StagesFile string
	// YDB is the DSN of the sinks' database (grpc://host:2136/local); the
	// sinks run only when it is set. SinkSources are the topics they follow
	// (default: every topic ydbsink maps).
	YDB         string
	SinkSources []string
	Logger      *slog.Logger
	// Started, if set, is called once every component is ready.
	Started func(Info)
}

// GoMemory returns the part of cfg's memory budget that is the Go
// runtime's (its soft limit): the budget less the local table stores'
// half where Pebble holds that half outside the Go heap (built with cgo).
// A process of only the cache and the sinks has no stores: the whole
// budget. So does a binary built without cgo (the image, the release
// binaries): there the stores' half is Go heap too, and a soft limit of
// half the budget kept the collector running without pause once the
// stores' caches filled.
func GoMemory(cfg Config) int64 { return goMemory(cfg, table.StoresOnGoHeap) }

func goMemory(cfg Config, storesOnHeap bool) int64 {
	selected := cfg.Components
	if len(selected) == 0 {
		selected = AllComponents()
	}
	if !storesOnHeap && storesOf(plan(selected, false)) > 0 {
		return cfg.Memory / 2
	}
	return cfg.Memory
}

// DefaultDataDir is --data's default.
const DefaultDataDir = "./data"

// DefaultViewStaleness is --view-staleness's default.
const DefaultViewStaleness = component.DefaultViewStaleness

// DefaultConfig returns the configuration of `offerlog dev`.
func DefaultConfig() Config {
	return Config{
		KafkaAddr: "127.0.0.1:9092", DataDir: DefaultDataDir, HTTPAddr: "127.0.0.1:8080", GRPCAddr: component.DefaultGRPC,
		Partitions: 8, Replication: -1, Rules: registry.DefaultRules(),
		EpochGrace: registry.DefaultEpochGrace, SweepInterval: registry.DefaultSweepInterval, WaitTimeout: component.DefaultWaitTimeout, ViewStaleness: DefaultViewStaleness,
		SearchWait: search.DefaultWait, ArchiveAfter: offers.DefaultArchiveAfter, ExportFraming: schemas.FramingSOE,
		Numerator: numerator.DefaultConfig(), ZooKeeperSession: component.DefaultSessionTimeout, Reads: ReadsView, CacheHedge: DefaultCacheHedge,
		Cache: CacheConfig{Table: string(topics.OffersTable), Addr: serving.DefaultAddr, DC: component.DefaultDC, Shards: serving.DefaultShards, Virtual: serving.DefaultVirtual,
			OnDisk: string(topics.OffersArchive)},
		Stages: scheduler.DefaultConfig(),
	}
}

// offers returns the offer aggregate's configuration of c.
func (c *Config) offers(s table.Config) offers.Config {
	after := c.ArchiveAfter
	if after <= 0 {
		after = -1 // offers.Config's "never"
	}
	return offers.Config{Streams: s, Stages: c.Stages.Names(), Exclusive: c.Stages.Exclusive(), Framing: c.ExportFraming, ArchiveAfter: after}
}

// Validate returns every problem of c joined, or nil.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 && c.KafkaAddr == "" {
		errs = append(errs, errors.New("neither brokers nor an address for the embedded broker"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("no data directory"))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions %d < 1", c.Partitions))
	}
	for _, comp := range c.Components {
		if !slices.Contains(AllComponents(), comp) {
			errs = append(errs, fmt.Errorf("unknown component %q (have %v)", comp, AllComponents()))
		}
	}
	if slices.Contains(c.Components, ComponentCache) || len(c.Components) == 0 {
		if err := c.Cache.validate(c.ZooKeeper); err != nil {
			errs = append(errs, err)
		}
	}
	if slices.Contains(c.Components, ComponentSinkYDB) && c.YDB == "" {
		errs = append(errs, errors.New("sink-ydb: --ydb is required"))
	}
	for _, s := range c.SinkSources {
		if _, ok := ydbsink.Sources[s]; !ok {
			errs = append(errs, fmt.Errorf("sink-ydb: no mapping for topic %q (have %v)", s, ydbsink.SourceNames()))
		}
	}
	if c.StagesFile != "" {
		stages, err := scheduler.LoadConfig(c.StagesFile)
		if err != nil {
			errs = append(errs, err)
		}
		c.Stages = stages
	} else if err := c.Stages.Validate(); err != nil {
		errs = append(errs, err)
	}
	if slices.Contains(c.Components, ComponentNumerator) || len(c.Components) == 0 {
		if c.Numerator.LockTimeout <= 0 || c.ZooKeeperSession < 0 {
			errs = append(errs, fmt.Errorf("numerator: lock timeout %v must be positive, session timeout %v not negative", c.Numerator.LockTimeout, c.ZooKeeperSession))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if c.Rules.MaxDocumentBytes <= 0 || c.Rules.TombstoneTTL <= 0 {
		errs = append(errs, errors.New("document size limit and tombstone TTL must be positive"))
	}
	return errors.Join(errs...)
}

// Info says where a started platform is.
type Info struct {
	Brokers    []string
	HTTPAddr   string
	PprofAddr  string
	GRPCAddr   string
	CacheAddr  string
	DataDir    string
	Components []string
	Embedded   bool
	// Insecure is set when auth is off; AdminToken is the file of the
	// admin token the embedded broker's first start wrote, if it exists.
	Insecure   bool
	AdminToken string
	// KafkaConfig is the embedded broker's librdkafka properties file
	// (address and SASL credentials), when it requires SASL or TLS.
	KafkaConfig string
	// TLS is set when HTTP, gRPC and the embedded broker serve TLS.
	TLS bool
}

// Run runs the platform until ctx is done, then shuts every component down
// (processors commit, the embedded broker flushes) and returns nil, or the
// error that made it stop. It starts the selected components of the list
// (components.go) in order, each after those it needs; on shutdown it
// cancels them all, waits for them, then closes what they opened, last
// opened first.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.Components) == 0 {
		// Everything; the sinks only with a database to write to.
		cfg.Components = slices.DeleteFunc(slices.Clone(AllComponents()), func(c string) bool { return c == ComponentSinkYDB && cfg.YDB == "" })
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	p, err := open(ctx, cfg)
	defer p.close()
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer p.sup.Wait()
	defer cancel()
	if cfg.PprofAddr != "" {
		if err := servePprof(runCtx, p, cfg.PprofAddr); err != nil {
			return err
		}
	}
	for _, c := range plan(cfg.Components, cfg.HTTPAddr != "") {
		if err := c.start(runCtx, p); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	for _, r := range p.ready {
		select {
		case <-r:
		case <-runCtx.Done():
		case <-p.sup.Failed():
		}
	}
	if runCtx.Err() == nil && p.sup.Err() == nil {
		p.log.Info("offerlog ready", "brokers", strings.Join(p.info.Brokers, ","), "http", p.info.HTTPAddr, "grpc", p.info.GRPCAddr, "components", cfg.Components)
		if cfg.Started != nil {
			cfg.Started(*p.info)
		}
	}
	select {
	case <-runCtx.Done():
	case <-p.sup.Failed():
	}
	p.log.Info("shutting down")
	cancel()
	p.sup.Wait()
	p.leaveGroups(ctx)
	return p.sup.Err()
}

// timerMemory is the scheduler's timer store's share of the budget: one
// table's (it holds every partition the service reads), or 0 for the
// default without a budget.
func (p *process) timerMemory() int64 {
	if p.cfg.Memory <= 0 {
		return 0
	}
	return p.scfg.StoreMemory * int64(max(p.cfg.Partitions, 1))
}

// process is what the components of one platform process share.
type process struct {
	cfg   Config
	log   *slog.Logger
	info  *Info
	kafka *streams.Cluster
	adm   *kadm.Client
	reg   *metrics.Registry
	scfg  table.Config
	sup   *supervisor
	// ready collects a channel per component, closed when it is ready.
	ready []<-chan struct{}
	// closers run when every component has stopped, last added first.
	closers []func()

	epochs       *registry.Catalogue
	registryView *registry.View
	// compat are the schema registry API's levels, which the process
	// follows from schemas.registered (startSchemas).
	compat schemas.Compatibilities
	// searcher is this process's searcher, nil where it runs elsewhere.
	searcher *search.Searcher
	// views are the views the process runs (goView).
	viewsMu  sync.Mutex
	views    []namedView
	answers  answerHub
	offerAPI *offerapi.Service
	handler  http.Handler
	// auth tells who calls the HTTP and gRPC servers (componentAuth).
	auth *auth.Authenticator
	// zk is the ZooKeeper connection of the cache clients (--reads
	// cache), dialled once (zookeeper).
	zkOnce sync.Once
	zk     zkConn
	// ids hands out offer ids to the offer API and the feed loader of
	// this process (offerIDs).
	ids *offers.IDs
}

// open starts what every component uses: the embedded broker (without
// brokers), an admin client, the topics of the catalogue, the metrics and
// the supervisor. The returned process is never nil: close it.
func open(ctx context.Context, cfg Config) (*process, error) {
	log := cfg.Logger
	p := &process{cfg: cfg, log: log, info: &Info{Brokers: cfg.Brokers, DataDir: cfg.DataDir, Components: cfg.Components}}
	// One process per data directory: a second one would share its broker
	// segments and the local table stores, and corrupt them.
	unlock, err := broker.LockDir(cfg.DataDir)
	if err != nil {
		return p, err
	}
	p.closers = append(p.closers, unlock)
	var serverTLS *tls.Config
	if cfg.TLSCert != "" {
		if serverTLS, err = listener.ServerTLS(cfg.TLSCert, cfg.TLSKey); err != nil {
			return p, err
		}
		p.cfg.Limits.TLS, p.info.TLS = serverTLS, true
		if p.cfg.TLSCA == "" {
			p.cfg.TLSCA = cfg.TLSCert
		}
	}
	if len(cfg.Brokers) == 0 {
		b, err := broker.Start(broker.Config{DataDir: cfg.DataDir, Addr: cfg.KafkaAddr, Partitions: int(cfg.Partitions), Fsync: cfg.Fsync, MaxRecordBytes: cfg.Client.MaxRecordBytes,
			SASL: !cfg.Insecure, TLS: serverTLS, CAFile: p.cfg.TLSCA, Logger: log})
		if err != nil {
			return p, err
		}
		if creds, ok := b.Credentials(); ok {
			p.cfg.Credentials = &creds
			p.info.KafkaConfig = filepath.Join(cfg.DataDir, broker.PropertiesFile)
		}
		p.closers = append(p.closers, func() {
			b.Close()
			log.Info("embedded broker stopped", "data", cfg.DataDir)
		})
		p.info.Brokers, p.info.Embedded = b.Addrs(), true
		log.Info("embedded broker started", "addr", b.Addrs()[0], "data", filepath.Join(cfg.DataDir, "broker"))
	}
	if p.kafka, err = streams.NewCluster(p.info.Brokers, p.cfg.Credentials, cfg.Client); err != nil {
		return p, err
	}
	p.closers = append(p.closers, p.kafka.Close)
	p.adm = p.kafka.Admin()
	// The topics its components use, and only those: a component's Kafka
	// user may create and describe those it declares (component.Grants),
	// no others.
	specs := specsOf(plan(cfg.Components, cfg.HTTPAddr != ""))
	var catalogue []topics.Topic
	for _, t := range append(topics.WithInputRetention(topics.Catalogue(cfg.Partitions), cfg.InputRetention),
		topics.ForStages(cfg.Stages.Names(), cfg.Stages.PushTopics(), cfg.Partitions)...) {
		if component.Uses(specs, t.Name) {
			catalogue = append(catalogue, t)
		}
	}
	created, err := topics.Ensure(ctx, p.adm, cfg.Replication, catalogue)
	if err != nil {
		return p, fmt.Errorf("topics: %w", err)
	}
	if len(created) > 0 {
		log.Info("topics created", "topics", created)
	}
	p.reg = metrics.New()
	p.viewMetrics()
	p.scfg = table.Config{Cluster: p.kafka, StateDir: filepath.Join(cfg.DataDir, "state"), Replication: 1, Standby: cfg.Standby, Logger: log,
		OnView: p.watchView}
	if cfg.Replication > 0 {
		p.scfg.Replication = int(cfg.Replication)
	}
	if cfg.Memory > 0 {
		// Half the budget, shared out among the partitions of the tables
		// and views the process's components keep (the scheduler's timer
		// store counted as one: timerMemory).
		stores := max(storesOf(plan(cfg.Components, false)), 1)
		p.scfg.StoreMemory = table.StoreMemoryOf(cfg.Memory/2, stores, int(cfg.Partitions))
		p.scfg.Cache = table.NewBlockCache(table.CacheMemoryOf(cfg.Memory/2, stores, int(cfg.Partitions)))
		p.closers = append(p.closers, p.scfg.Cache.Close)
	}
	p.sup = &supervisor{log: log, restarts: p.reg.Counter("offerlog_component_restarts_total", "Restarts of a component after it failed, by component.", "component")}
	return p, nil
}

// close runs the closers, last added first.
func (p *process) close() {
	for _, c := range slices.Backward(p.closers) {
		c()
	}
}

func (p *process) readyFunc() func() { return readySignal(&p.ready) }

func decodeVerdict(b []byte) (schemas.Verdict, streams.RequestID, error) {
	var v schemas.Verdict
	err := schemas.Verdicts.Decode(b, &v)
	return v, streams.RequestID{Partition: v.SourcePartition, Offset: v.SourceOffset}, err
}

// DefaultMemory is offerlog dev's and offerlog run's --memory.
const DefaultMemory = 1 << 30

// ParseMemory reads a memory size as --memory takes it: bytes, or a number
// with KiB, MiB or GiB.
func ParseMemory(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
			break
		}
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive size such as 512MiB or 2GiB")
	}
	return n * mult, nil
}

// FormatMemory writes n as ParseMemory reads it, in GiB or MiB when whole.
func FormatMemory(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprint(n)
}
