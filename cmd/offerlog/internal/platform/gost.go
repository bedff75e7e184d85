package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/api"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/feeds"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// readySignal adds a channel to ready and returns the function that closes
// it (once, however often a restarted component calls it).
func readySignal(ready *[]<-chan struct{}) func() {
	r := make(chan struct{})
	*ready = append(*ready, r)
	var once sync.Once
	return func() { once.Do(func() { close(r) }) }
}

// view starts a view of topic named name. A view that reads answers
// (reads) refuses them while it is behind its topic for longer than
// --view-staleness (table.View.StaleAfter).
func (g *process) view(ctx context.Context, topic string, codec streams.Codec, name string, reads bool) (*table.View, error) {
	v := table.NewView(g.scfg, topics.Table(topic), codec, name)
	if reads {
		v.StaleAfter = g.cfg.ViewStaleness
	}
	g.goView(ctx, name, v, v.Run)
	g.ready = append(g.ready, v.Ready())
	return v, nil
}

// goView runs a view until every component has stopped (a closer stops
// it), so that its readers are answered for as long as they run. A view
// that fails (a batch its store refused, a partition stuck behind its
// topic) is started again on its store after a backoff, as a restartable
// component is: meanwhile /readyz names it, and its staleness grows. A
// partition behind its topic that stands still for --view-staleness ends
// the view (table.View.StuckAfter), to be restarted so.
func (g *process) goView(ctx context.Context, name string, v *table.View, run func(context.Context) error) {
	g.watchView(name, v) // for as long as the process runs
	vctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.sup.Run(vctx, name, true, run)
	}()
	g.closers = append(g.closers, func() {
		cancel()
		<-done
	})
}

// watchView is table.Config.OnView: a view a component runs itself
// (table.RunView: the scheduler's and the numerator's) is watched as the
// process's own are (its staleness metric, /readyz) and ends when its
// partition stands still behind its topic for --view-staleness, which
// ends the component for its supervisor to restart.
func (g *process) watchView(name string, v *table.View) (remove func()) {
	v.StuckAfter = g.cfg.ViewStaleness
	g.viewsMu.Lock()
	g.views = append(g.views, namedView{name, v})
	g.viewsMu.Unlock()
	return func() {
		g.viewsMu.Lock()
		defer g.viewsMu.Unlock()
		g.views = slices.DeleteFunc(g.views, func(nv namedView) bool { return nv.v == v })
	}
}

// allViews returns the views of the process.
func (g *process) allViews() []namedView {
	g.viewsMu.Lock()
	defer g.viewsMu.Unlock()
	return slices.Clone(g.views)
}

// namedView is a view of the process, for its staleness metric and
// readiness.
type namedView struct {
	name string
	v    *table.View
}

// staleViews returns an error naming the views of the process behind
// their topics for longer than --view-staleness, or nil.
func (g *process) staleViews() error {
	if g.cfg.ViewStaleness <= 0 {
		return nil
	}
	var errs []error
	for _, nv := range g.allViews() {
		if d := nv.v.Staleness(); d > g.cfg.ViewStaleness {
			errs = append(errs, fmt.Errorf("view %s behind its topic %s for %v (--view-staleness %v)", nv.name, nv.v.Topic(), d.Round(time.Millisecond), g.cfg.ViewStaleness))
		}
	}
	return errors.Join(errs...)
}

// viewMetrics registers the views' staleness gauge.
func (g *process) viewMetrics() {
	g.reg.GaugeFunc("offerlog_view_staleness_seconds", "How long a view has been behind its topic: since it first saw the topic hold an offset it has not read (0 when caught up).",
		[]string{"view"}, func() []metrics.Sample {
			views := g.allViews()
			out := make([]metrics.Sample, len(views))
			for i, nv := range views {
				out[i] = metrics.Sample{Labels: []string{nv.name}, Value: nv.v.Staleness().Seconds()}
			}
			return out
		})
}

// producer returns a producer with acks=all, closed when the process stops.
func (g *process) producer(id string) (*kgo.Client, error) {
	p, err := g.kafka.Client(kgo.ClientID(id),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, p.Close)
	return p, nil
}

// answerHub hands the answers of the aggregate running in this process to
// the matchers of this process's offer clients (offers.Config.OnAnswer):
// a write whose command the process's own aggregate decides is answered
// without its answer's way back through the broker. The topic's copy
// comes later and is kept as an unclaimed reply.
type answerHub struct {
	mu       sync.Mutex
	matchers []*streams.Replies[schemas.OfferResult]
}

// add hands r the answers until remove is called (when its owner stops: a
// component the supervisor restarts registers its new matcher).
func (h *answerHub) add(r *streams.Replies[schemas.OfferResult]) (remove func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.matchers = append(h.matchers, r)
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		// A new array: deliver ranges over the one it copied, unlocked.
		h.matchers = slices.DeleteFunc(slices.Clone(h.matchers), func(m *streams.Replies[schemas.OfferResult]) bool { return m == r })
	}
}

func (h *answerHub) deliver(res schemas.OfferResult) {
	h.mu.Lock()
	matchers := h.matchers // never changed in place: add appends, remove copies
	h.mu.Unlock()
	id := streams.RequestID{Partition: res.SourcePartition, Offset: res.SourceOffset}
	for _, m := range matchers {
		m.Deliver(id, res)
	}
}

// offerIDs returns the process's allocator of offer ids, opened once.
func (g *process) offerIDs(ctx context.Context) (*offers.IDs, error) {
	if g.ids != nil {
		return g.ids, nil
	}
	by := g.kafka.Settings().InstanceID
	if by == "" {
		by, _ = os.Hostname()
	}
	ids, err := offers.OpenIDs(ctx, g.kafka, by)
	if err != nil {
		return nil, err
	}
	g.ids = ids
	g.closers = append(g.closers, ids.Close)
	return ids, nil
}

// offersClient returns a client of the aggregate with its own answers.
func (g *process) offersClient(ctx context.Context, p *kgo.Client, name string) *offers.Client {
	res := offers.NewResults(g.log)
	g.sup.Go(ctx, name, false, func(ctx context.Context) error {
		defer g.answers.add(res)()
		return res.Run(ctx, g.kafka)
	})
	g.ready = append(g.ready, res.Ready())
	return offers.NewClient(p, res, g.cfg.WaitTimeout).ObserveHops(g.reg.WriteHops())
}

// feeds starts the feed loader.
func (g *process) feeds(ctx context.Context) error {
	p, err := g.producer("offerlog-feeds")
	if err != nil {
		return err
	}
	v, err := g.view(ctx, string(feeds.Index), feeds.IndexCodec, "feeds-index", false)
	if err != nil {
		return err
	}
	status, err := g.view(ctx, string(feeds.Statuses), feeds.StatusCodec, "feeds-status", false)
	if err != nil {
		return err
	}
	tasks, err := g.view(ctx, string(feeds.Tasks), feeds.IndexCodec, "feeds-tasks", false)
	if err != nil {
		return err
	}
	ids, err := g.offerIDs(ctx)
	if err != nil {
		return err
	}
	c := feeds.Config{Streams: g.scfg, Producer: p, Offers: g.offersClient(ctx, p, "feeds-answers"), IDs: ids, View: v, Tasks: tasks, Status: status,
		Partitions: g.cfg.Partitions, Metrics: feeds.NewMetrics(g.reg), Logger: g.log}
	g.sup.Go(ctx, ComponentFeeds, true, func(ctx context.Context) error { return feeds.Run(ctx, c) })
	return nil
}

// api returns the offer API service with its views and answers.
func (g *process) api(ctx context.Context) (*offerapi.Service, error) {
	p, err := g.producer("offerlog-offer-api")
	if err != nil {
		return nil, err
	}
	ids, err := g.offerIDs(ctx)
	if err != nil {
		return nil, err
	}
	cfg := offerapi.Config{Producer: p, Offers: g.offersClient(ctx, p, "offer-answers"), IDs: ids, Timeout: g.cfg.WaitTimeout,
		Hops: g.reg.WriteHops(), Logger: g.log}
	cfg.Drafts = drafts.NewResults(g.log)
	g.sup.Go(ctx, "draft-answers", false, func(ctx context.Context) error { return cfg.Drafts.Run(ctx, g.kafka) })
	g.ready = append(g.ready, cfg.Drafts.Ready())
	if cfg.Records, err = g.offerRecords(ctx); err != nil {
		return nil, err
	}
	views := []struct {
		v     **table.View
		table string
		codec streams.Codec
	}{
		{&cfg.DraftsView, string(drafts.Table), drafts.TableCodec},
		{&cfg.CabinetView, string(cabinet.Table), cabinet.TableCodec},
		{&cfg.PresetsView, string(topics.CabinetPresets), cabinet.PresetsCodec},
		{&cfg.StatusView, string(feeds.Statuses), feeds.StatusCodec},
	}
	for _, vw := range views {
		if *vw.v, err = g.view(ctx, vw.table, vw.codec, "api-"+vw.table, true); err != nil {
			return nil, err
		}
	}
	return offerapi.New(cfg)
}

// serveGRPC serves svc's and docs's gRPC APIs on addr until ctx is done
// and returns the address it listens on.
func (g *process) serveGRPC(ctx context.Context, addr string, svc *offerapi.Service, docs *api.Server) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("grpc: %w", err)
	}
	srv := g.cfg.Limits.GRPCServer(g.auth.GRPCOptions(nil)...)
	ln = g.cfg.Limits.Bound(ln)
	svc.RegisterGRPC(srv)
	svc.RegisterStageStates(srv)
	docs.RegisterGRPC(srv)
	docs.RegisterSearchGRPC(srv)
	g.sup.Go(ctx, "grpc", false, func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			srv.GracefulStop()
		}()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	})
	return ln.Addr().String(), nil
}
