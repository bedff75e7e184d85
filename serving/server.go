package serving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas/proto/servingv1"
)

// ServerConfig configures a cache server.
type ServerConfig struct {
	Brokers []string
	// Table is the compacted topic served.
	Table string
	// Shards is how many shards the table is cut into.
	Shards int
	// DC and Host name the server in answers.
	DC, Host string
	// Owner decides the server's shard.
	Owner   Owner
	Metrics *metrics.Registry
	Logger  *slog.Logger
}

// Server holds one shard of a table in memory, kept up to date from the
// topic, and answers Get for it. Safe for concurrent use.
type Server struct {
	servingv1.UnimplementedCacheServer
	cfg ServerConfig

	mu    sync.RWMutex
	shard *servingv1.Shard // nil while no shard is held
	ready bool             // the shard is caught up with the topic
	store map[string][]byte

	gets   *metrics.CounterVec
	loaded *metrics.Counter
}

// NewServer returns a server; Run starts it.
func NewServer(cfg ServerConfig) (*Server, error) {
	if len(cfg.Brokers) == 0 || cfg.Table == "" || cfg.Shards < 1 || cfg.Owner == nil {
		return nil, errors.New("serving: brokers, table, shards and owner are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	return &Server{cfg: cfg,
		gets:   cfg.Metrics.Counter("offerlog_cache_gets_total", "Cache Gets by outcome.", "outcome"),
		loaded: cfg.Metrics.Counter("offerlog_cache_records_total", "Table records applied to the cache's store.").With(),
	}, nil
}

// Serve answers gRPC on ln and keeps a shard until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	g := grpc.NewServer()
	servingv1.RegisterCacheServer(g, s)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	err := s.Run(ctx)
	g.Stop()
	if serr := <-errc; serr != nil && !errors.Is(serr, grpc.ErrServerStopped) {
		err = errors.Join(err, serr)
	}
	return err
}

// Run claims a shard, materialises it and keeps it fresh; when the shard is
// lost it stops answering, drops the store and claims again. It returns
// when ctx is done.
func (s *Server) Run(ctx context.Context) error {
	defer s.cfg.Owner.Close()
	for ctx.Err() == nil {
		i, gen, lost, err := s.cfg.Owner.Claim(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("serving: claim a shard: %w", err)
		}
		if err := s.hold(ctx, i, gen, lost); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("serving: shard dropped", "shard", i, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// hold serves shard i until it is lost or ctx is done.
func (s *Server) hold(ctx context.Context, i int, gen int64, lost <-chan struct{}) error {
	adm, err := kgo.NewClient(kgo.SeedBrokers(s.cfg.Brokers...))
	if err != nil {
		return err
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, s.cfg.Table)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", s.cfg.Table, err)
	}
	partitions := int32(len(ends[s.cfg.Table]))
	lo, hi, err := Range(i, s.cfg.Shards, partitions)
	if err != nil {
		return err
	}
	shard := &servingv1.Shard{Table: s.cfg.Table, Lo: lo, Hi: hi, Partitions: partitions, Dc: s.cfg.DC, Host: s.cfg.Host, Generation: gen}
	want := map[int32]int64{}
	start := map[string]map[int32]kgo.Offset{s.cfg.Table: {}}
	for p := lo; p < hi; p++ {
		start[s.cfg.Table][p] = kgo.NewOffset().AtStart()
		if o, ok := ends.Lookup(s.cfg.Table, p); ok && o.Offset > 0 {
			want[p] = o.Offset
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.cfg.Brokers...), kgo.ConsumePartitions(start),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.ClientID("offerlog-cache-"+s.cfg.Host))
	if err != nil {
		return err
	}
	defer cl.Close()
	store := make(map[string][]byte)
	s.mu.Lock()
	s.shard, s.ready, s.store = shard, len(want) == 0, store
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.shard, s.ready, s.store = nil, false, nil
		s.mu.Unlock()
	}()
	s.cfg.Logger.Info("serving: shard held, loading", "table", s.cfg.Table, "shard", i, "partitions", fmt.Sprintf("[%d,%d)", lo, hi))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-lost:
			s.mu.Lock()
			s.shard, s.ready = nil, false // stop answering at once
			s.mu.Unlock()
			cancel()
		case <-ctx.Done():
		}
	}()
	quiet := time.Now()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			select {
			case <-lost:
				return errors.New("the shard was lost")
			default:
				return nil
			}
		}
		fs.EachError(func(t string, p int32, err error) {
			s.cfg.Logger.Warn("serving: fetch failed", "topic", t, "partition", p, "err", err)
		})
		n := 0
		s.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if r.Value == nil {
				delete(s.store, string(r.Key))
			} else {
				s.store[string(r.Key)] = r.Value
			}
			if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
				delete(want, r.Partition)
			}
		})
		// A compacted topic may no longer hold the records before its end
		// offsets (kfake compacts the tail): a second without records
		// counts as caught up.
		if n > 0 {
			quiet = time.Now()
		} else if len(want) > 0 && time.Since(quiet) > time.Second {
			clear(want)
		}
		if !s.ready && len(want) == 0 && s.shard != nil {
			s.ready = true
			s.cfg.Logger.Info("serving: shard loaded", "table", s.cfg.Table, "shard", i, "keys", len(s.store))
		}
		s.mu.Unlock()
		s.loaded.Add(uint64(n))
	}
}

// Ready reports whether the server holds a shard caught up with the topic.
func (s *Server) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.shard != nil && s.ready
}

// Get answers the keys of the server's shard; see the Cache service.
func (s *Server) Get(_ context.Context, req *servingv1.GetRequest) (*servingv1.GetResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.shard == nil:
		s.gets.With("no shard").Inc()
		return nil, status.Error(codes.Unavailable, "no shard held")
	case !s.ready:
		s.gets.With("loading").Inc()
		return nil, status.Errorf(codes.Unavailable, "shard [%d,%d) of %s still loading", s.shard.Lo, s.shard.Hi, s.cfg.Table)
	}
	resp := &servingv1.GetResponse{Shard: s.shard, AllMatched: true}
	for _, k := range req.Keys {
		if !Holds(s.shard, k) {
			s.gets.With("wrong shard").Inc()
			return &servingv1.GetResponse{Shard: s.shard}, nil
		}
	}
	resp.Entries = make([]*servingv1.Entry, len(req.Keys))
	for i, k := range req.Keys {
		v, ok := s.store[k]
		resp.Entries[i] = &servingv1.Entry{Key: k, Found: ok, Value: v}
	}
	s.gets.With("ok").Inc()
	return resp, nil
}
