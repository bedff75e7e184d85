package serving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/internal/listener"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas/proto/servingv1"
	"github.com/offerlog/offerlog/streams"
)

// ServerConfig configures a cache server.
type ServerConfig struct {
	// Cluster is the cluster whose table it serves.
	Cluster *streams.Cluster
	// Table is the compacted topic served, or, with Source, the name the
	// source's table is asked by.
	Table string
	// Source, if set, is what the shards are materialised from instead of
	// the topic Table of Cluster (TopicSource): any store a service has
	// (the seed's cache is a template any service can use).
	Source Source
	// Dir, if set, keeps the shard on disk there (a Pebble store, emptied
	// and loaded again for each shard held) instead of in memory: for a
	// table too large and read too rarely for the heap (offers.archive).
	Dir string
	// Shards is how many shards the table is cut into.
	Shards int
	// Virtual, if set, cuts the table by hash ranges: Virtual virtual
	// shards (a key's is its murmur2 hash modulo Virtual), of which a
	// server holds a range; Shards may then be as large as Virtual, and
	// grows by adding servers. Every server reads every partition and
	// keeps its own keys. 0 cuts it by ranges of partitions, so at most as
	// many shards as the topic has partitions (before 0.5.0).
	Virtual int
	// DC and Host name the server in answers.
	DC, Host string
	// Owner decides the server's shard.
	Owner Owner
	// Limits bound the gRPC server; GRPCOptions are added to them
	// (credentials, interceptors).
	Limits      listener.Limits
	GRPCOptions []grpc.ServerOption
	Metrics     *metrics.Registry
	Logger      *slog.Logger
}

// Server holds one shard of a table in memory, kept up to date from the
// topic, and answers Get for it. Safe for concurrent use.
type Server struct {
	servingv1.UnimplementedCacheServer
	cfg    ServerConfig
	source Source

	mu    sync.RWMutex
	shard *servingv1.Shard // nil while no shard is held
	ready bool             // the shard is caught up with the topic
	store store
	// next is, per partition of the shard, the offset after the last
	// record applied.
	next map[int32]int64

	gets   *metrics.CounterVec
	keys   *metrics.Counter // keys answered
	loaded *metrics.Counter
}

// NewServer returns a server; Run starts it.
func NewServer(cfg ServerConfig) (*Server, error) {
	if (cfg.Cluster == nil && cfg.Source == nil) || cfg.Table == "" || cfg.Shards < 1 || cfg.Owner == nil {
		return nil, errors.New("serving: a cluster or a source, a table, shards and an owner are required")
	}
	if cfg.Virtual < 0 || (cfg.Virtual > 0 && cfg.Shards > cfg.Virtual) {
		return nil, fmt.Errorf("serving: %d shards of %d virtual shards", cfg.Shards, cfg.Virtual)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	source := cfg.Source
	if source == nil {
		source = TopicSource{Cluster: cfg.Cluster, Topic: cfg.Table, Name: "cache-" + cfg.Host, Logger: cfg.Logger}
	}
	return &Server{cfg: cfg, source: source,
		gets:   cfg.Metrics.Counter("offerlog_cache_gets_total", "Cache Gets by outcome.", "outcome"),
		keys:   cfg.Metrics.Counter("offerlog_cache_keys_total", "Keys the cache answered (found or not).").With(),
		loaded: cfg.Metrics.Counter("offerlog_cache_records_total", "Table records applied to the cache's store.").With(),
	}, nil
}

// Serve answers gRPC on ln and keeps a shard until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return serve(ctx, ln, s.cfg.Limits.GRPCServer(s.cfg.GRPCOptions...), s, s.Run)
}

// serve answers impl's Cache service on g and ln while run runs.
func serve(ctx context.Context, ln net.Listener, g *grpc.Server, impl servingv1.CacheServer, run func(context.Context) error) error {
	servingv1.RegisterCacheServer(g, impl)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	err := run(ctx)
	g.Stop()
	if serr := <-errc; serr != nil && !errors.Is(serr, grpc.ErrServerStopped) {
		err = errors.Join(err, serr)
	}
	return err
}

// Mux answers the Cache service of several servers, each of its own table,
// on one gRPC server: a request goes to the server of the table it names
// (the first server when it names none). One process serves, say,
// offers-table and registry-table on one port.
type Mux struct {
	servingv1.UnimplementedCacheServer
	servers []*Server
}

// NewMux returns a mux of servers (one per table); Serve runs them.
func NewMux(servers ...*Server) *Mux { return &Mux{servers: servers} }

// Get answers from the server of req's table.
func (m *Mux) Get(ctx context.Context, req *servingv1.GetRequest) (*servingv1.GetResponse, error) {
	for _, s := range m.servers {
		if req.Table == "" || req.Table == s.cfg.Table {
			return s.Get(ctx, req)
		}
	}
	return nil, status.Errorf(codes.NotFound, "no shard of %s is served here", req.Table)
}

// Ready reports whether every server holds a loaded shard.
func (m *Mux) Ready() bool {
	for _, s := range m.servers {
		if !s.Ready() {
			return false
		}
	}
	return true
}

// Serve answers the Cache service on g (with its limits and credentials)
// and ln, and runs every server until ctx is done; the first that fails
// stops the others.
func (m *Mux) Serve(ctx context.Context, ln net.Listener, g *grpc.Server) error {
	return serve(ctx, ln, g, m, func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errs := make([]error, len(m.servers))
		var wg sync.WaitGroup
		for i, s := range m.servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if errs[i] = s.Run(ctx); errs[i] != nil {
					cancel()
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
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
	partitions, err := s.source.Partitions(ctx)
	if err != nil {
		return err
	}
	// The shard: a range of partitions, read alone; or a hash range, its
	// keys read from every partition.
	cut := partitions
	if s.cfg.Virtual > 0 {
		cut = int32(s.cfg.Virtual)
	}
	lo, hi, err := Range(i, s.cfg.Shards, cut)
	if err != nil {
		return err
	}
	readLo, readHi, share := lo, hi, 1.0
	if s.cfg.Virtual > 0 {
		readLo, readHi, share = 0, partitions, float64(hi-lo)/float64(cut)
	}
	shard := &servingv1.Shard{Table: s.cfg.Table, Lo: lo, Hi: hi, Partitions: partitions, Virtual: int32(s.cfg.Virtual),
		Dc: s.cfg.DC, Host: s.cfg.Host, Generation: gen}
	var records int64
	if sz, ok := s.source.(Sizer); ok {
		records = sz.Size(ctx, readLo, readHi)
	}
	var st store = newSlabStore(storeHint(int64(float64(records)*share)), 0)
	if s.cfg.Dir != "" {
		if st, err = newDiskStore(s.cfg.Dir, s.cfg.Logger); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.shard, s.ready, s.store, s.next = shard, false, st, map[int32]int64{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.shard, s.ready, s.store, s.next = nil, false, nil, nil
		s.mu.Unlock()
		if err := st.Close(); err != nil {
			s.cfg.Logger.Warn("serving: close the shard's store", "table", s.cfg.Table, "err", err)
		}
	}()
	s.cfg.Logger.Info("serving: shard held, loading", "table", s.cfg.Table, "shard", i, "holds", describe(shard))

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
	apply := func(es []Entry) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range es {
			if s.store == nil {
				return nil
			}
			if e.Offset >= 0 {
				s.next[e.Partition] = max(s.next[e.Partition], e.Offset+1)
			}
			if shard.Virtual > 0 && !Holds(shard, e.Key) {
				continue // another shard's key, in a partition this one reads too
			}
			var err error
			if e.Value == nil {
				err = s.store.Delete(e.Key)
			} else {
				err = s.store.Set(e.Key, e.Value) // a copy: a record's value holds its whole fetch
			}
			if err != nil {
				return fmt.Errorf("serving: the store of %s: %w", s.cfg.Table, err)
			}
		}
		s.loaded.Add(uint64(len(es)))
		return nil
	}
	loaded := func(next map[int32]int64) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.shard == nil {
			return
		}
		for p, o := range next {
			s.next[p] = max(s.next[p], o)
		}
		if !s.ready {
			s.ready = true
			s.cfg.Logger.Info("serving: shard loaded", "table", s.cfg.Table, "shard", i, "keys", s.store.Len())
		}
	}
	err = s.source.Sync(ctx, readLo, readHi, apply, loaded)
	select {
	case <-lost:
		return errors.New("the shard was lost")
	default:
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
}

// maxStoreHint caps storeHint: 4 Mi keys are an index of 128 MiB before
// any record.
const maxStoreHint = 1 << 22

// storeHint returns how many keys to size a shard's store for, from the
// records its load will read. Growing a map of a million keys one doubling
// at a time was most of a shard's load time (rehashing); a compacted log
// holds at most about twice its live keys (it is cleaned once half of it
// is dirty), so sizing for every record wastes at most half, and the cap
// bounds what a log full of superseded records can make it reserve.
func storeHint(records int64) int {
	return int(min(max(records, 0), maxStoreHint))
}

// Keys returns how many keys the server's shard holds now.
func (s *Server) Keys() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.store == nil {
		return 0
	}
	return s.store.Len()
}

// Ready reports whether the server holds a shard caught up with the topic.
func (s *Server) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.shard != nil && s.ready
}

// withShard returns st's error carrying shard as a detail: an answer that
// is not the keys still names the shard the server holds (ShardOf).
func withShard(st *status.Status, shard *servingv1.Shard) error {
	if d, err := st.WithDetails(shard); err == nil {
		return d.Err()
	}
	return st.Err()
}

// ShardOf returns the shard an error of Get names (a server still loading
// it, or holding none: an empty range), nil if it names none.
func ShardOf(err error) *servingv1.Shard {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if sh, ok := d.(*servingv1.Shard); ok {
			return sh
		}
	}
	return nil
}

// Get answers the keys of the server's shard; see the Cache service.
func (s *Server) Get(_ context.Context, req *servingv1.GetRequest) (*servingv1.GetResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case req.Table != "" && req.Table != s.cfg.Table:
		return nil, status.Errorf(codes.NotFound, "this server holds %s, not %s", s.cfg.Table, req.Table)
	case s.shard == nil:
		// The shard is always returned (the seed): none, an empty range
		// of this host, which a client routes nothing to.
		s.gets.With("no shard").Inc()
		return nil, withShard(status.New(codes.Unavailable, "no shard held"),
			&servingv1.Shard{Table: s.cfg.Table, Dc: s.cfg.DC, Host: s.cfg.Host})
	case !s.ready:
		s.gets.With("loading").Inc()
		return nil, withShard(status.Newf(codes.Unavailable, "shard of %s (%s) still loading", s.cfg.Table, describe(s.shard)), s.shard)
	}
	resp := &servingv1.GetResponse{Shard: s.shard, AllMatched: true}
	for _, k := range req.Keys {
		if !Holds(s.shard, k) {
			s.gets.With("wrong shard").Inc()
			return &servingv1.GetResponse{Shard: s.shard}, nil
		}
	}
	if req.WithOffsets {
		resp.NextOffsets = make(map[int32]int64, len(s.next))
		for p, o := range s.next {
			resp.NextOffsets[p] = o
		}
	}
	resp.Entries = make([]*servingv1.Entry, len(req.Keys))
	for i, k := range req.Keys {
		v, ok, err := s.store.Get(k)
		if err != nil {
			// Not "not found": the key may well be held. Unavailable, as a
			// shard still loading, so that a client asks another server.
			s.gets.With("store error").Inc()
			s.cfg.Logger.Error("serving: read the shard's store", "table", s.cfg.Table, "key", k, "err", err)
			return nil, withShard(status.Newf(codes.Unavailable, "shard of %s (%s): %v", s.cfg.Table, describe(s.shard), err), s.shard)
		}
		resp.Entries[i] = &servingv1.Entry{Key: k, Found: ok, Value: v}
	}
	s.gets.With("ok").Inc()
	s.keys.Add(uint64(len(req.Keys)))
	return resp, nil
}
