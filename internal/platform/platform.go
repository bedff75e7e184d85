// Package platform wires offerlog's components into one process: the
// embedded broker (when no brokers are given), the topic catalogue, the
// epoch catalogue, the registry and indexer processors, the registry view
// and the HTTP API with /metrics. `offerlog dev` runs all of them; `offerlog
// run COMPONENT` runs one against a real cluster.
package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/api"
	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/feeds"
	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/sinks/ydbsink"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Components that can be run.
const (
	ComponentRegistry  = "registry"
	ComponentIndexer   = "indexer"
	ComponentAPI       = "api"
	ComponentNumerator = "numerator"
)

// AllComponents lists every component, in start order.
var AllComponents = []string{ComponentRegistry, ComponentIndexer, ComponentNumerator,
	ComponentOffers, ComponentDrafts, ComponentCabinet, ComponentFeeds, ComponentScheduler, ComponentAPI, ComponentCache, ComponentSinkYDB}

// Config of a platform process.
type Config struct {
	// Brokers of an existing cluster; empty starts the embedded broker on
	// KafkaAddr with its data under DataDir/broker.
	Brokers   []string
	KafkaAddr string
	// Fsync makes the embedded broker fsync every batch before its
	// acknowledgement (broker.Config.Fsync).
	Fsync bool
	// DataDir holds the embedded broker's data and goka's local state
	// (DataDir/state).
	DataDir string
	// HTTPAddr serves the API and /metrics; "" serves nothing.
	HTTPAddr string
	// GRPCAddr serves the offer API over gRPC with the api component; ""
	// serves nothing.
	GRPCAddr string
	// Components to run; empty runs all.
	Components []string
	// Partitions of the catalogue's partitioned topics; Replication of the
	// topics created (-1: the broker's default).
	Partitions  int32
	Replication int16
	Rules       registry.Rules
	EpochGrace  time.Duration
	// SweepInterval of the registry's expiry sweep.
	SweepInterval time.Duration
	WaitTimeout   time.Duration
	// Numerator configures the numerator (its Streams, Coordinator and
	// Logger are filled in by Run).
	Numerator numerator.Config
	// ZooKeeper ("host:port,...") holds the numerator's coordinator and the
	// cache's shard ownership; "" keeps both in process, which is right only
	// with a single master and a single cache server per table.
	ZooKeeper string
	// Cache configures the cache component.
	Cache CacheConfig
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

// DefaultConfig returns the configuration of `offerlog dev`.
func DefaultConfig() Config {
	return Config{
		KafkaAddr: "127.0.0.1:9092", DataDir: "./data", HTTPAddr: "127.0.0.1:8080", GRPCAddr: "127.0.0.1:9090",
		Partitions: 8, Replication: -1, Rules: registry.DefaultRules(),
		EpochGrace: registry.DefaultEpochGrace, SweepInterval: time.Minute, WaitTimeout: 30 * time.Second,
		Numerator: numerator.DefaultConfig(),
		Cache:     CacheConfig{Table: topics.OffersTable, Addr: "127.0.0.1:9091", DC: "dc1", Shards: 1},
		Stages:    scheduler.DefaultConfig(),
	}
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
		if !slices.Contains(AllComponents, comp) {
			errs = append(errs, fmt.Errorf("unknown component %q (have %v)", comp, AllComponents))
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
	if c.Rules.MaxDocumentBytes <= 0 || c.Rules.TombstoneTTL <= 0 {
		errs = append(errs, errors.New("document size limit and tombstone TTL must be positive"))
	}
	return errors.Join(errs...)
}

// Info says where a started platform is.
type Info struct {
	Brokers    []string
	HTTPAddr   string
	GRPCAddr   string
	CacheAddr  string
	DataDir    string
	Components []string
	Embedded   bool
}

// Run runs the platform until ctx is done, then shuts every component down
// (processors commit, the embedded broker flushes) and returns nil, or the
// error that made it stop.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.Components) == 0 {
		// Everything; the sinks only with a database to write to.
		cfg.Components = slices.DeleteFunc(slices.Clone(AllComponents), func(c string) bool { return c == ComponentSinkYDB && cfg.YDB == "" })
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger
	info := Info{Brokers: cfg.Brokers, DataDir: cfg.DataDir, Components: cfg.Components}
	if len(cfg.Brokers) == 0 {
		b, err := broker.Start(broker.Config{DataDir: cfg.DataDir, Addr: cfg.KafkaAddr, Partitions: int(cfg.Partitions), Fsync: cfg.Fsync, Logger: log})
		if err != nil {
			return err
		}
		defer func() {
			b.Close()
			log.Info("embedded broker stopped", "data", cfg.DataDir)
		}()
		info.Brokers, info.Embedded = b.Addrs(), true
		log.Info("embedded broker started", "addr", b.Addrs()[0], "data", filepath.Join(cfg.DataDir, "broker"))
	}
	brokers := info.Brokers

	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID("offerlog-admin"))
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	created, err := topics.Ensure(ctx, adm, cfg.Replication, append(topics.Catalogue(cfg.Partitions), topics.ForStages(cfg.Stages.Names(), cfg.Partitions)...))
	if err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	if len(created) > 0 {
		log.Info("topics created", "topics", created)
	}

	reg := metrics.New()
	scfg := streams.Config{Brokers: brokers, StateDir: filepath.Join(cfg.DataDir, "state"), Replication: 1, Logger: log}
	if cfg.Replication > 0 {
		scfg.Replication = int(cfg.Replication)
	}
	registerLag(reg, adm, cfg.Stages.Names())

	sup := &supervisor{log: log, restarts: reg.Counter("offerlog_component_restarts_total", "Restarts of a component after it failed, by component.", "component")}
	// On every return: stop the components, then wait for them (defers run
	// last first).
	defer sup.Wait()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	epochs := registry.NewCatalogue(cfg.EpochGrace)
	sup.Go(runCtx, "epochs", false, func(ctx context.Context) error { return epochs.Follow(ctx, brokers, log) })
	if err := epochs.Sync(ctx, adm); err != nil {
		return fmt.Errorf("epochs: %w", err)
	}

	var ready []<-chan struct{}
	has := func(c string) bool { return slices.Contains(cfg.Components, c) }
	if has(ComponentRegistry) {
		m := registry.NewMetrics(reg)
		onReady := readySignal(&ready)
		sup.Go(runCtx, ComponentRegistry, true, func(ctx context.Context) error {
			return registry.Run(ctx, registry.Config{Streams: scfg, Rules: cfg.Rules, Epochs: epochs,
				SweepInterval: cfg.SweepInterval, Metrics: m, Logger: log, OnReady: onReady})
		})
	}

	if has(ComponentNumerator) {
		ncfg := cfg.Numerator
		ncfg.Streams, ncfg.Logger, ncfg.Metrics = scfg, log, numerator.NewMetrics(reg)
		ncfg.Cluster = strings.Join(brokers, ",")
		if cfg.ZooKeeper == "" {
			ncfg.Coordinator = &coordinator.Local{}
		} else {
			zk, err := coordinator.DialZooKeeper(ctx, cfg.ZooKeeper, fmt.Sprintf("/offerlog/numerator/%d", ncfg.Type), log)
			if err != nil {
				return err
			}
			defer zk.Close()
			ncfg.Coordinator = zk
		}
		sup.Go(runCtx, ComponentNumerator, true, func(ctx context.Context) error { return numerator.Run(ctx, ncfg) })
	}

	var view *registry.View
	if has(ComponentIndexer) || has(ComponentAPI) {
		view, err = registry.NewView(scfg, "registry-"+string(ComponentAPI))
		if err != nil {
			return err
		}
		sup.Go(runCtx, "registry-view", false, view.Run)
		ready = append(ready, view.Ready())
	}
	if has(ComponentIndexer) {
		m := indexer.NewMetrics(reg)
		sup.Go(runCtx, ComponentIndexer, true, func(ctx context.Context) error {
			return indexer.Run(ctx, indexer.Config{Brokers: brokers, Partitions: cfg.Partitions, Replication: cfg.Replication,
				Current: view.Get, Metrics: m, Logger: log})
		})
	}

	g := &gost{sup: sup, scfg: scfg, brokers: brokers, reg: reg, log: log, timeout: cfg.WaitTimeout, stages: cfg.Stages}
	defer func() {
		for _, c := range g.closers {
			c()
		}
	}()
	g.groups(runCtx, has)
	if has(ComponentFeeds) {
		if err := g.feeds(runCtx); err != nil {
			return err
		}
	}
	var offerAPI *offerapi.Service
	if has(ComponentAPI) {
		if offerAPI, err = g.api(runCtx); err != nil {
			return err
		}
		if cfg.GRPCAddr != "" {
			if info.GRPCAddr, err = g.serveGRPC(runCtx, cfg.GRPCAddr, offerAPI); err != nil {
				return err
			}
		}
	}
	ready = append(ready, g.ready...)
	if has(ComponentSinkYDB) && cfg.YDB != "" {
		if err := runSinks(runCtx, sup, cfg, brokers, reg, log); err != nil {
			return err
		}
	}
	if has(ComponentCache) {
		addr, r, err := runCache(runCtx, sup, cfg, brokers, reg, log)
		if err != nil {
			return err
		}
		info.CacheAddr = addr
		ready = append(ready, r)
	}

	var srv *http.Server
	if cfg.HTTPAddr != "" {
		readyNow := func() error {
			for _, r := range ready {
				select {
				case <-r:
				default:
					return errors.New("starting")
				}
			}
			return errors.Join(sup.Err(), sup.Restarting())
		}
		// Every process serves its metrics and probes; the api also its routes.
		probes := http.NewServeMux()
		probes.Handle("GET /metrics", reg.Handler())
		probes.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"status":"ok"}`) })
		probes.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
			if err := readyNow(); err != nil {
				http.Error(w, `{"error":"`+err.Error()+`"}`, http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, `{"status":"ready"}`)
		})
		handler := http.Handler(probes)
		if has(ComponentAPI) {
			producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID("offerlog-api"),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
			if err != nil {
				return err
			}
			defer producer.Close()
			verdicts := streams.NewReplies(topics.DocumentsResults, 10*time.Second, log, decodeVerdict)
			sup.Go(runCtx, "verdicts", false, func(ctx context.Context) error { return verdicts.Run(ctx, brokers) })
			ready = append(ready, verdicts.Ready())
			a, err := api.New(api.Config{Producer: producer, Epochs: epochs, Registry: view, Verdicts: verdicts,
				Partitions: cfg.Partitions, Replication: cfg.Replication, Rules: cfg.Rules, WaitTimeout: cfg.WaitTimeout,
				Offers: offerAPI, Metrics: reg, Logger: log, Ready: readyNow})
			if err != nil {
				return err
			}
			handler = a
		}
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("http: %w", err)
		}
		info.HTTPAddr = ln.Addr().String()
		srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		sup.Go(runCtx, "http", false, func(context.Context) error {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}

	// Wait for every component, or for the end.
	for _, r := range ready {
		select {
		case <-r:
		case <-runCtx.Done():
		case <-sup.Failed():
		}
	}
	if runCtx.Err() == nil && sup.Err() == nil {
		log.Info("offerlog ready", "brokers", brokers, "http", info.HTTPAddr, "grpc", info.GRPCAddr, "components", cfg.Components)
		if cfg.Started != nil {
			cfg.Started(info)
		}
	}
	select {
	case <-runCtx.Done():
	case <-sup.Failed():
	}
	log.Info("shutting down")
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = srv.Shutdown(sctx)
		scancel()
	}
	cancel()
	sup.Wait()
	return sup.Err()
}

func decodeVerdict(b []byte) (schemas.Verdict, streams.RequestID, error) {
	var v schemas.Verdict
	err := schemas.Verdicts.Decode(b, &v)
	return v, streams.RequestID{Partition: v.SourcePartition, Offset: v.SourceOffset}, err
}

// registerLag exports the consumer lag of offerlog's groups, computed at
// scrape time.
func registerLag(reg *metrics.Registry, adm *kadm.Client, stages []string) {
	groups := []string{string(registry.Group), indexer.Group, indexer.RetryGroup, string(numerator.Group), numerator.SealerGroup,
		string(offers.Group), offers.InboxGroup, string(drafts.Group), string(cabinet.Group), feeds.Group,
		scheduler.RouterGroup, scheduler.TimersGroup}
	for _, src := range ydbsink.SourceNames() {
		groups = append(groups, ydbsink.Group(src))
	}
	for _, s := range stages {
		groups = append(groups, scheduler.Group(s, false), scheduler.Group(s, true))
	}
	reg.GaugeFunc("offerlog_consumer_lag", "Records not yet consumed by a group, per topic and partition.",
		[]string{"group", "topic", "partition"}, func() []metrics.Sample {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			lags, err := adm.Lag(ctx, groups...)
			if err != nil {
				return nil
			}
			var out []metrics.Sample
			for _, g := range groups {
				l, ok := lags[g]
				if !ok || l.Error() != nil {
					continue
				}
				for _, ml := range l.Lag.Sorted() {
					out = append(out, metrics.Sample{
						Labels: []string{g, ml.Topic, fmt.Sprint(ml.Partition)}, Value: float64(ml.Lag)})
				}
			}
			return out
		})
}
