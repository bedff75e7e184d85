package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/offerlog/offerlog/internal/api"
	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// component is one entry of the platform: a name, the components it needs
// started before it, and how it starts. start runs the component's
// goroutines under the process's supervisor (which restarts a failed one
// with backoff) and registers its ready signals and closers with the
// process; it returns once they are started.
type component struct {
	name string
	// user marks a component a user selects (AllComponents); the others
	// run because a selected one needs them.
	user  bool
	needs []string
	start func(ctx context.Context, p *process) error
}

// Internal components, started for the user components that need them.
const (
	componentEpochs       = "epochs"
	componentRegistryView = "registry-view"
	componentOfferAPI     = "offer-api"
	componentHTTP         = "http"
	componentAuth         = "auth"
)

// components is the platform, declared once, in start order (every
// component after those it needs): `offerlog dev`, `offerlog run` and the
// tests start their part of it. Shutdown cancels every component, waits
// for all of them, then runs the closers, last opened first.
var components = []component{
	{name: componentAuth, start: startAuth},
	{name: componentEpochs, start: startEpochs},
	{name: ComponentRegistry, user: true, needs: []string{componentEpochs}, start: startRegistry},
	{name: componentRegistryView, start: startRegistryView},
	{name: ComponentIndexer, user: true, needs: []string{componentRegistryView}, start: startIndexer},
	{name: ComponentNumerator, user: true, start: startNumerator},
	{name: ComponentOffers, user: true, start: func(ctx context.Context, p *process) error {
		c := offers.Config{Streams: p.scfg, Stages: p.cfg.Stages.Names(), Framing: p.cfg.ExportFraming, Metrics: offers.NewMetrics(p.reg),
			OnReady: p.readyFunc(), OnAnswer: p.answers.deliver}
		return p.goGroup(ctx, ComponentOffers, func(ctx context.Context) error { return offers.Run(ctx, c) })
	}},
	{name: ComponentDrafts, user: true, start: func(ctx context.Context, p *process) error {
		c := drafts.Config{Streams: p.scfg, Metrics: drafts.NewMetrics(p.reg), OnReady: p.readyFunc()}
		return p.goGroup(ctx, ComponentDrafts, func(ctx context.Context) error { return drafts.Run(ctx, c) })
	}},
	{name: ComponentCabinet, user: true, start: func(ctx context.Context, p *process) error {
		c := cabinet.Config{Streams: p.scfg, Metrics: cabinet.NewMetrics(p.reg), OnReady: p.readyFunc()}
		return p.goGroup(ctx, ComponentCabinet, func(ctx context.Context) error { return cabinet.Run(ctx, c) })
	}},
	{name: ComponentFeeds, user: true, start: func(ctx context.Context, p *process) error { return p.feeds(ctx) }},
	{name: ComponentScheduler, user: true, start: func(ctx context.Context, p *process) error {
		c := scheduler.RunConfig{Streams: p.scfg, Stages: p.cfg.Stages, Timeout: p.cfg.WaitTimeout, TimerMemory: p.timerMemory(),
			Metrics: scheduler.NewMetrics(p.reg), Logger: p.log, OnReady: p.readyFunc(), OnMatcher: p.answers.add}
		return p.goGroup(ctx, ComponentScheduler, func(ctx context.Context) error { return scheduler.Run(ctx, c) })
	}},
	{name: ComponentCache, user: true, needs: []string{componentAuth}, start: func(ctx context.Context, p *process) error {
		addr, r, err := runCache(ctx, p.sup, p.cfg, p.brokers, p.reg, p.log, p.auth)
		if err != nil {
			return err
		}
		p.info.CacheAddr = addr
		p.ready = append(p.ready, r)
		return nil
	}},
	{name: componentOfferAPI, needs: []string{componentAuth}, start: startOfferAPI},
	{name: ComponentAPI, user: true, needs: []string{componentAuth, componentEpochs, componentRegistryView, componentOfferAPI}, start: startAPI},
	{name: ComponentSinkYDB, user: true, start: func(ctx context.Context, p *process) error {
		if p.cfg.YDB == "" {
			return nil
		}
		return runSinks(ctx, p.sup, p.cfg, p.brokers, p.reg, p.log)
	}},
	{name: ComponentLag, user: true, start: startLag},
	{name: componentHTTP, start: startHTTP},
}

// AllComponents lists the components a user selects, in start order.
var AllComponents = userComponents()

func userComponents() []string {
	var out []string
	for _, c := range components {
		if c.user {
			out = append(out, c.name)
		}
	}
	return out
}

// plan returns the components to start for the selected ones: those, what
// they need, and the HTTP server of metrics and probes (with the API's
// routes when the api runs) if there is an address, in list order.
func plan(selected []string, http bool) []component {
	want := map[string]bool{}
	var add func(name string)
	add = func(name string) {
		if want[name] {
			return
		}
		want[name] = true
		for _, c := range components {
			if c.name == name {
				for _, n := range c.needs {
					add(n)
				}
			}
		}
	}
	for _, s := range selected {
		add(s)
	}
	if http {
		add(componentHTTP)
	}
	var out []component
	for _, c := range components {
		if want[c.name] {
			out = append(out, c)
		}
	}
	return out
}

// goGroup runs a goka group under the supervisor.
func (p *process) goGroup(ctx context.Context, name string, run func(context.Context) error) error {
	p.sup.Go(ctx, name, true, run)
	return nil
}

func startEpochs(ctx context.Context, p *process) error {
	p.epochs = registry.NewCatalogue(p.cfg.EpochGrace)
	p.sup.Go(ctx, componentEpochs, false, func(ctx context.Context) error { return p.epochs.Follow(ctx, p.brokers, p.log) })
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
	p.goView(ctx, componentRegistryView, v.Run)
	p.ready = append(p.ready, v.Ready())
	return nil
}

func startIndexer(ctx context.Context, p *process) error {
	c := indexer.Config{Brokers: p.brokers, Partitions: p.cfg.Partitions, Replication: p.cfg.Replication, Framing: p.cfg.ExportFraming,
		Current: p.registryView.Get, Metrics: indexer.NewMetrics(p.reg), Logger: p.log}
	p.sup.Go(ctx, ComponentIndexer, true, func(ctx context.Context) error { return indexer.Run(ctx, c) })
	return nil
}

func startNumerator(ctx context.Context, p *process) error {
	c := p.cfg.Numerator
	c.Streams, c.Logger, c.Metrics = p.scfg, p.log, numerator.NewMetrics(p.reg)
	c.Cluster = strings.Join(p.brokers, ",")
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
	p.sup.Go(ctx, "verdicts", false, func(ctx context.Context) error { return verdicts.Run(ctx, p.brokers) })
	p.ready = append(p.ready, verdicts.Ready())
	documents, err := p.documents(ctx)
	if err != nil {
		return err
	}
	srv, err := api.New(api.Config{Producer: producer, Epochs: p.epochs, Registry: documents, Verdicts: verdicts,
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
	return errors.Join(p.sup.Err(), p.sup.Restarting())
}
