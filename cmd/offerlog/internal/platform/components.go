package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/api"
	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/feeds"
	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/sinks/ydbsink"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// entry is one component of the platform: its spec (what it declares of
// itself, package component: a processor package's Spec, or the
// composition root's own below), how it starts and how it replays. start
// runs the component's goroutines under the process's supervisor (which
// restarts a failed one with backoff) and registers its ready signals and
// closers with the process; it returns once they are started. Everything
// else that names components is derived from the specs: the CLI's flags
// and their help (ComponentFlags), `offerlog run`'s metrics port (MetricsAddr), the
// memory budget (storesOf), the lag component's groups (lagGroups),
// `offerlog replay` (Replay) and `offerlog repartition`.
type entry struct {
	component.Spec
	start func(ctx context.Context, p *process) error
	// replay, if set, rebuilds the component's group (offerlog replay).
	replay func(ctx context.Context, r Replaying) error
}

// The components a user runs (AllComponents); a processor group's is its
// group's name.
const (
	ComponentRegistry  = registry.Group
	ComponentIndexer   = indexer.Group
	ComponentNumerator = numerator.Group
	ComponentOffers    = offers.Group
	ComponentDrafts    = drafts.Group
	ComponentCabinet   = cabinet.Group
	ComponentFeeds     = feeds.Group
	// ComponentAPI is the HTTP and gRPC API.
	ComponentAPI = "api"
	// ComponentLag computes the consumer lag of offerlog's groups, once per
	// cluster: one process runs it (its own Deployment of one replica in
	// deploy/k8s, a part of `offerlog dev`). Every process computing every
	// group's lag made a dashboard's sum count it once per pod.
	ComponentLag = "lag"
)

// The components named by their packages' specs.
var (
	// ComponentScheduler runs the stage scheduler: router, stage workers,
	// timer service.
	ComponentScheduler = scheduler.Spec.Name
	// ComponentCache is the serving cache's server.
	ComponentCache = serving.Spec.Name
	// ComponentSinkYDB keeps the seeds' YDB tables equal to the log; it
	// runs only when Config.YDB is set.
	ComponentSinkYDB = ydbsink.Spec.Name
)

// Internal components, started for the user components that need them.
const (
	componentEpochs       = "epochs"
	componentRegistryView = "registry-view"
	componentOfferAPI     = "offer-api"
	componentHTTP         = "http"
	componentAuth         = "auth"
	componentSchemas      = "schemas"
)

// apiFlags are the flags of the API's own.
var apiFlags = []component.Flag{
	{Name: "reads", Default: ReadsView, Usage: "where the API reads offers and documents: view (a copy of the whole offers-table and registry-table in this process) " +
		"or cache (the serving cache's servers of those tables: --cache-hosts, else those in --zookeeper, else this process's cache)"},
	{Name: "cache-hosts", Usage: "comma-separated cache servers that --reads cache asks (default: from --zookeeper)"},
	{Name: "cache-hedge", Default: DefaultCacheHedge.String(), Usage: "how long --reads cache waits for the cache servers of its own data centre (--dc) " +
		"before asking the others; negative: ask every data centre at once (the seed's fan-out)"},
	{Name: "cache-token", Usage: "admin token --reads cache sends to the cache (default: $OFFERLOG_CACHE_TOKEN, else DATA/admin.token)"},
}

// DefaultCacheHedge is how long --reads cache waits for its own data
// centre's cache servers unless told.
const DefaultCacheHedge = 50 * time.Millisecond

// redriveTopics are the topics the console may put a dead letter back
// on: the inputs of the consumers that send dead letters (a sink's, which
// are tables, are re-driven by offerlog deadletters redrive as the admin).
var redriveTopics = []string{topics.DocumentsIngest, topics.DocumentsChanges, topics.DocumentsUrgent, topics.DocumentsFailed,
	topics.SaasPrefix + "*", topics.NumeratorOffers, topics.NumeratorResults, topics.NumeratorGenerations, topics.OffersCommands,
	topics.PhotosResults, topics.ModerationOpinions, topics.CabinetChanges, topics.DraftsCommands, topics.FeedsIngest,
	topics.OffersEvents, topics.QueuePrefix + "*", topics.PushPrefix + "*"}

// components is the platform, registered once, in start order (every
// component after those it needs): `offerlog dev`, `offerlog run` and the
// tests start their part of it. Shutdown cancels every component, waits
// for all of them, then runs the closers, last opened first.
func components() []entry {
	return []entry{
		{Spec: component.Spec{Name: componentSchemas, Summary: "the registered schemas, followed (every process)",
			Reads: []string{topics.SchemasRegistered}}, start: func(ctx context.Context, p *process) error {
			startSchemas(ctx, p)
			return nil
		}},
		{Spec: component.Spec{Name: componentAuth, Summary: "API tokens: the auth.tokens table in memory", Reads: []string{topics.AuthTokens}},
			start: startAuth},
		{Spec: component.Spec{Name: componentEpochs, Summary: "the epoch catalogue, followed", Reads: []string{topics.Epochs}}, start: startEpochs},
		{Spec: registry.Spec, start: startRegistry, replay: replayRegistry},
		{Spec: component.Spec{Name: componentRegistryView, Summary: "a view of the registry's table", Stores: 1,
			Reads: []string{string(topics.RegistryTable)}}, start: startRegistryView},
		{Spec: indexer.Spec, start: startIndexer, replay: replayIndexer},
		{Spec: numerator.Spec, start: startNumerator, replay: replayNumerator},
		{Spec: offers.Spec, start: func(ctx context.Context, p *process) error {
			c := p.cfg.offers(p.scfg)
			c.Metrics, c.OnReady, c.OnAnswer = offers.NewMetrics(p.reg), p.readyFunc(), p.answers.deliver
			return p.goGroup(ctx, ComponentOffers, func(ctx context.Context) error { return offers.Run(ctx, c) })
		}, replay: replayOffers},
		{Spec: drafts.Spec, start: func(ctx context.Context, p *process) error {
			c := drafts.Config{Streams: p.scfg, Metrics: drafts.NewMetrics(p.reg), OnReady: p.readyFunc()}
			return p.goGroup(ctx, ComponentDrafts, func(ctx context.Context) error { return drafts.Run(ctx, c) })
		}, replay: func(ctx context.Context, r Replaying) error {
			return drafts.Replay(ctx, drafts.Config{Streams: r.Streams}, r.Config.Partitions, r.Config.Replication)
		}},
		{Spec: cabinet.Spec, start: func(ctx context.Context, p *process) error {
			c := cabinet.Config{Streams: p.scfg, Metrics: cabinet.NewMetrics(p.reg), OnReady: p.readyFunc()}
			return p.goGroup(ctx, ComponentCabinet, func(ctx context.Context) error { return cabinet.Run(ctx, c) })
		}, replay: func(ctx context.Context, r Replaying) error {
			return cabinet.Replay(ctx, cabinet.Config{Streams: r.Streams}, r.Config.Partitions, r.Config.Replication)
		}},
		{Spec: feeds.Spec, start: func(ctx context.Context, p *process) error { return p.feeds(ctx) }},
		{Spec: scheduler.Spec, start: func(ctx context.Context, p *process) error {
			c := scheduler.RunConfig{Streams: p.scfg, Stages: p.cfg.Stages, Timeout: p.cfg.WaitTimeout, TimerMemory: p.timerMemory(),
				Metrics: scheduler.NewMetrics(p.reg), Logger: p.log, OnReady: p.readyFunc(), OnMatcher: p.answers.add}
			return p.goGroup(ctx, ComponentScheduler, func(ctx context.Context) error { return scheduler.Run(ctx, c) })
		}},
		{Spec: serving.Spec, start: func(ctx context.Context, p *process) error {
			addr, r, err := runCache(ctx, p.sup, p.cfg, p.kafka, p.reg, p.log, p.auth)
			if err != nil {
				return err
			}
			p.info.CacheAddr = addr
			p.ready = append(p.ready, r)
			return nil
		}},
		{Spec: search.Spec, start: startSearcher, replay: func(ctx context.Context, r Replaying) error {
			epochs, stop := followEpochs(ctx, r)
			defer stop()
			return search.Replay(ctx, search.Config{Cluster: r.Streams.Cluster, Dir: filepath.Join(r.Streams.StateDir, "searcher"), Epochs: epochs,
				Logger: r.Logger})
		}},
		// The offer API's views: drafts, cabinet, presets, feed statuses and,
		// unless it reads through the cache, the offers and their archive.
		{Spec: component.Spec{Name: componentOfferAPI, Summary: "the offer API's views and answers", Needs: []string{componentAuth}, Stores: 6,
			Reads: slices.Concat([]string{string(topics.DraftsTable), string(topics.CabinetTable), string(topics.CabinetPresets), string(topics.FeedsStatus),
				string(topics.OffersTable), string(topics.OffersArchive), topics.DraftsResults}, offers.ClientReads, offers.IDsTopics),
			Writes: slices.Concat([]string{topics.DraftsCommands, topics.FeedsIngest}, offers.ClientWrites, offers.IDsTopics)},
			start: startOfferAPI},
		{Spec: component.Spec{Name: ComponentAPI, User: true, Summary: "the HTTP and gRPC API: documents, offers, stages, tokens, the console",
			Needs: []string{componentAuth, componentEpochs, componentRegistryView, componentOfferAPI},
			Flags: slices.Concat([]component.Flag{registry.MaxDocumentBytesFlag, registry.TombstoneTTLFlag, component.WaitTimeout,
				component.ViewStaleness, component.GRPC, component.ZooKeeper, component.DC}, apiFlags),
			// the console reads the dead letters and puts them back on
			// their topics, and shows every topic's and group's offsets
			Reads: slices.Concat([]string{topics.DocumentsResults, topics.DocumentsIngest, topics.SchemasRegistered, topics.NumeratorStates,
				topics.NumeratorGenerations, topics.SchedulerTimers}, topics.DeadLetterTopics()),
			Writes: slices.Concat([]string{topics.DocumentsIngest, topics.Epochs, topics.SchemasRegistered, topics.AuthTokens},
				redriveTopics),
			Creates:   []string{topics.SaasPrefix + "*", topics.YtPrefix + "*"},
			Describes: []string{"*"}, DescribesGroups: []string{"*"}},
			start: startAPI},
		{Spec: ydbsink.Spec, start: func(ctx context.Context, p *process) error {
			if p.cfg.YDB == "" {
				return nil
			}
			return runSinks(ctx, p.sup, p.cfg, p.kafka, p.reg, p.log)
		}},
		{Spec: component.Spec{Name: ComponentLag, User: true, Port: 8091, Summary: "the consumer lag of every group of offerlog's, once per cluster",
			Describes: []string{"*"}, DescribesGroups: []string{"*"}}, start: startLag},
		{Spec: component.Spec{Name: componentHTTP, Summary: "metrics, probes and the API's routes over HTTP"}, start: startHTTP},
	}
}

// AllComponents returns the components a user selects, in start order.
func AllComponents() []string {
	var out []string
	for _, c := range components() {
		if c.User {
			out = append(out, c.Name)
		}
	}
	return out
}

// Specs returns every component's spec, in start order.
func Specs() []component.Spec { return specsOf(components()) }

// UserSpecs returns the specs of what `offerlog run NAME` runs: the
// component and those it needs (its Kafka user's grants are theirs).
func UserSpecs(name string) []component.Spec { return specsOf(plan([]string{name}, true)) }

func specsOf(es []entry) []component.Spec {
	out := make([]component.Spec, len(es))
	for i, e := range es {
		out[i] = e.Spec
	}
	return out
}

// ComponentFlags returns the flags the components declare (component.Flag),
// by name, and for each the components that read it: `offerlog run NAME
// --help` lists a component's own and the common ones.
func ComponentFlags() (map[string]component.Flag, map[string][]string) {
	return component.Flags(Specs())
}

// MetricsAddr returns where `offerlog run NAME` serves /metrics and the
// probes by default, "" for a component that has no port of its own (the
// api serves them on its --http).
func MetricsAddr(name string) string {
	for _, c := range components() {
		if c.Name == name && c.Port != 0 {
			return fmt.Sprintf("127.0.0.1:%d", c.Port)
		}
	}
	return ""
}

// storesOf returns how many tables and views the components of cs keep in
// local stores.
func storesOf(cs []entry) int {
	n := 0
	for _, c := range cs {
		n += c.Stores
	}
	return n
}

// plan returns the components to start for the selected ones: those, what
// they need, and the HTTP server of metrics and probes (with the API's
// routes when the api runs) if there is an address, in list order.
func plan(selected []string, http bool) []entry {
	want := map[string]bool{}
	var add func(name string)
	add = func(name string) {
		if want[name] {
			return
		}
		want[name] = true
		for _, c := range components() {
			if c.Name == name {
				for _, n := range c.Needs {
					add(n)
				}
			}
		}
	}
	add(componentSchemas)
	for _, s := range selected {
		add(s)
	}
	if http {
		add(componentHTTP)
	}
	var out []entry
	for _, c := range components() {
		if want[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

// goGroup runs a processor group under the supervisor.
func (p *process) goGroup(ctx context.Context, name string, run func(context.Context) error) error {
	p.sup.Go(ctx, name, true, run)
	return nil
}

func startEpochs(ctx context.Context, p *process) error {
	p.epochs = registry.NewCatalogue(p.cfg.EpochGrace)
	p.sup.Go(ctx, componentEpochs, false, func(ctx context.Context) error { return p.epochs.Follow(ctx, p.kafka, p.log) })
	if err := p.epochs.Sync(ctx, p.adm); err != nil {
		return fmt.Errorf("epochs: %w", err)
	}
	return nil
}

func startRegistry(ctx context.Context, p *process) error {
	c := registry.Config{Streams: p.scfg, Rules: p.cfg.Rules, Epochs: p.epochs, SweepInterval: p.cfg.SweepInterval, Framing: p.cfg.ExportFraming,
		Metrics: registry.NewMetrics(p.reg), Logger: p.log, OnReady: p.readyFunc()}
	p.sup.Go(ctx, ComponentRegistry, true, func(ctx context.Context) error { return registry.Run(ctx, c) })
	return nil
}

func startRegistryView(ctx context.Context, p *process) error {
	// With --reads cache the API reads documents through the cache: the
	// view is the indexer's only.
	if cached, _ := p.readsCache(); cached && !slices.Contains(p.cfg.Components, ComponentIndexer) {
		return nil
	}
	v, err := registry.NewView(p.scfg, "registry-"+ComponentAPI)
	if err != nil {
		return err
	}
	p.registryView = v
	p.goView(ctx, componentRegistryView, v.View(), v.Run)
	p.ready = append(p.ready, v.Ready())
	return nil
}

func startIndexer(ctx context.Context, p *process) error {
	c := indexer.Config{Cluster: p.kafka, Partitions: p.cfg.Partitions, Replication: p.cfg.Replication, Framing: p.cfg.ExportFraming,
		Current: p.registryView.Get, Metrics: indexer.NewMetrics(p.reg), Logger: p.log}
	p.sup.Go(ctx, ComponentIndexer, true, func(ctx context.Context) error { return indexer.Run(ctx, c) })
	return nil
}

func startNumerator(ctx context.Context, p *process) error {
	c := p.cfg.Numerator
	c.Streams, c.Logger, c.Metrics = p.scfg, p.log, numerator.NewMetrics(p.reg)
	c.Cluster = strings.Join(p.kafka.Brokers(), ",")
	if p.cfg.ZooKeeper == "" {
		c.Coordinator = &coordinator.Local{}
	} else {
		zk, err := coordinator.DialZooKeeper(ctx, p.cfg.ZooKeeper, fmt.Sprintf("/offerlog/numerator/%d", c.Type), p.cfg.ZooKeeperSession, p.log)
		if err != nil {
			return err
		}
		p.closers = append(p.closers, zk.Close)
		c.Coordinator = zk
	}
	p.sup.Go(ctx, ComponentNumerator, true, func(ctx context.Context) error { return numerator.Run(ctx, c) })
	return nil
}

// startSearcher starts the searcher on the process's local state: the
// API of the process searches through it.
func startSearcher(ctx context.Context, p *process) error {
	s := search.New(search.Config{Cluster: p.kafka, Dir: filepath.Join(p.scfg.StateDir, "searcher"), Epochs: p.epochs,
		Wait: p.cfg.SearchWait, Advertise: p.cfg.SearchAdvertise, Metrics: streams.NewLoopMetrics(p.reg), Logger: p.log,
		OnReady: p.readyFunc()})
	p.searcher = s
	p.sup.Go(ctx, search.Spec.Name, true, s.Run)
	return nil
}

// startOfferAPI starts the offer API's service (its views and answers).
func startOfferAPI(ctx context.Context, p *process) error {
	svc, err := p.api(ctx)
	if err != nil {
		return err
	}
	p.offerAPI = svc
	return nil
}

// startAPI builds the HTTP API, which the http component serves.
func startAPI(ctx context.Context, p *process) error {
	producer, err := p.producer("offerlog-api")
	if err != nil {
		return err
	}
	reply := p.reg.WriteHops().With("document", "reply")
	verdicts := streams.NewReplies(topics.DocumentsResults, 10*time.Second, p.log, decodeVerdict).
		ObserveTransit(func(d time.Duration) { reply.Observe(d.Seconds()) })
	p.sup.Go(ctx, "verdicts", false, func(ctx context.Context) error { return verdicts.Run(ctx, p.kafka) })
	p.ready = append(p.ready, verdicts.Ready())
	documents, err := p.documents(ctx)
	if err != nil {
		return err
	}
	// The process's own searcher, else the members of the searcher's
	// group, each asked for the partitions it holds.
	var searcher api.Searcher = search.NewRemote(search.RemoteConfig{Cluster: p.kafka, Epochs: p.epochs, Logger: p.log})
	if p.searcher != nil {
		searcher = p.searcher
	}
	srv, err := api.New(api.Config{Producer: producer, Search: searcher, Cluster: p.kafka, Epochs: p.epochs, Compatibilities: &p.compat, Registry: documents, Verdicts: verdicts,
		Partitions: p.cfg.Partitions, Replication: p.cfg.Replication, Rules: p.cfg.Rules, WaitTimeout: p.cfg.WaitTimeout,
		Offers: p.offerAPI, Metrics: p.reg, Logger: p.log, Ready: p.readyNow, Auth: p.auth})
	if err != nil {
		return err
	}
	p.handler = srv
	if p.cfg.GRPCAddr != "" {
		// The offer service, stage states and the document receiver.
		if p.info.GRPCAddr, err = p.serveGRPC(ctx, p.cfg.GRPCAddr, p.offerAPI, srv); err != nil {
			return err
		}
	}
	return nil
}

// startHTTP serves the metrics and probes of every process, and the API's
// routes where the api runs; it is shut down before the components stop.
func startHTTP(ctx context.Context, p *process) error {
	handler := p.handler
	if handler == nil {
		probes := http.NewServeMux()
		probes.Handle("GET /metrics", p.reg.Handler())
		probes.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"status":"ok"}`) })
		probes.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
			if err := p.readyNow(); err != nil {
				http.Error(w, `{"error":"`+err.Error()+`"}`, http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, `{"status":"ready"}`)
		})
		if p.searcher != nil {
			// A searcher member: the API's searches fan out to it.
			probes.Handle("POST /v1/clients/{client}/search", api.MemberSearch(p.searcher, p.auth))
		}
		handler = probes
	}
	ln, err := net.Listen("tcp", p.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	p.info.HTTPAddr = ln.Addr().String()
	limits := p.cfg.Limits
	if limits.WriteTimeout == 0 {
		// An answer may wait for a verdict or a group's answer.
		limits.WriteTimeout = max(listener.DefaultLimits.WriteTimeout, p.cfg.WaitTimeout+30*time.Second)
	}
	ln = limits.HTTPListener(ln)
	srv := limits.HTTPServer(handler)
	p.sup.Go(ctx, componentHTTP, false, func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return nil
}

// readyNow returns nil when every started component is ready and none is
// down.
func (p *process) readyNow() error {
	for _, r := range p.ready {
		select {
		case <-r:
		default:
			return errors.New("starting")
		}
	}
	return errors.Join(p.sup.Err(), p.sup.Restarting(), p.staleViews())
}
