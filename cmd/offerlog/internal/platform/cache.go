package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams"
)

// CacheConfig configures the cache component.
type CacheConfig struct {
	// Table is the compacted topic served (offers-table, registry-table,
	// numerator.assignments, ...), or several, comma-separated, served by
	// one server each on the same address (serving.Mux).
	Table string
	// Addr serves gRPC; DC and Host name the server; Shards is how many
	// shards the table is cut into (1 without ZooKeeper).
	Addr, DC, Host string
	Shards         int
	// Virtual cuts each table by hash ranges of that many virtual shards
	// (serving.ServerConfig.Virtual, default serving.DefaultVirtual): a
	// data centre grows by adding servers, up to Virtual shards; 0 cuts by
	// ranges of partitions, as before 0.5.0.
	Virtual int
	// OnDisk are the tables (comma-separated) each server keeps on disk,
	// under DataDir/cache, instead of in memory (serving.ServerConfig.Dir):
	// by default offers.archive, a year of archived offers, read by id now
	// and then.
	OnDisk string
}

// onDisk reports whether the cache keeps table on disk.
func (c *CacheConfig) onDisk(table string) bool {
	return c.OnDisk != "" && slices.Contains(strings.Split(c.OnDisk, ","), table)
}

// tables returns the tables served.
func (c *CacheConfig) tables() []string { return strings.Split(c.Table, ",") }

// serves reports whether the cache serves table.
func (c *CacheConfig) serves(table string) bool { return slices.Contains(c.tables(), table) }

func (c *CacheConfig) validate(zookeeper string) error {
	switch {
	case c.Table == "" || c.Addr == "" || c.DC == "":
		return errors.New("cache: table, gRPC address and data centre are required")
	case c.Shards < 1:
		return fmt.Errorf("cache: %d shards", c.Shards)
	case zookeeper == "" && c.Shards != 1:
		return fmt.Errorf("cache: %d shards need --zookeeper to share them out", c.Shards)
	case c.Virtual < 0 || (c.Virtual > 0 && c.Shards > c.Virtual):
		return fmt.Errorf("cache: %d shards of %d virtual shards", c.Shards, c.Virtual)
	}
	return nil
}

// runCache starts the cache component and returns its address and a
// channel closed once it holds a loaded shard of every table.
func runCache(ctx context.Context, sup *supervisor, cfg Config, kafka *streams.Cluster, reg *metrics.Registry, log *slog.Logger, authn *auth.Authenticator) (string, <-chan struct{}, error) {
	r, err := newCacheRunner(cfg, kafka, reg, log, authn)
	if err != nil {
		return "", nil, err
	}
	sup.Go(ctx, ComponentCache, true, r.run)
	ready := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for !r.ready() {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		close(ready)
	}()
	return r.addr, ready, nil
}

// cacheRunner runs the cache component. Each run (the first, and every
// restart after a failure) listens on the same address, claims its shards
// afresh and serves them: a run that ended leaves nothing a restart could
// trip on (its listener is closed, its owners' sessions too).
type cacheRunner struct {
	cfg   Config
	cc    CacheConfig
	kafka *streams.Cluster
	reg   *metrics.Registry
	log   *slog.Logger
	authn *auth.Authenticator
	// bound is the address listened on (the port chosen at the first
	// listen), addr the one announced to clients.
	bound, addr string
	first       net.Listener // the first run's, opened to learn the address
	current     atomic.Pointer[serving.Mux]
}

func newCacheRunner(cfg Config, kafka *streams.Cluster, reg *metrics.Registry, log *slog.Logger, authn *auth.Authenticator) (*cacheRunner, error) {
	cc := cfg.Cache
	if cc.Host == "" {
		cc.Host, _ = os.Hostname()
	}
	ln, err := net.Listen("tcp", cc.Addr)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return &cacheRunner{cfg: cfg, cc: cc, kafka: kafka, reg: reg, log: log, authn: authn,
		bound: ln.Addr().String(), addr: advertised(ln.Addr().(*net.TCPAddr)), first: ln}, nil
}

// run serves until ctx is done or a server fails. The supervisor calls it
// again after a failure, never twice at once.
func (r *cacheRunner) run(ctx context.Context) error {
	ln := r.first
	r.first = nil
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", r.bound); err != nil {
			return fmt.Errorf("cache: %w", err)
		}
	}
	var servers []*serving.Server
	var owners []serving.Owner
	fail := func(err error) error {
		ln.Close()
		for _, o := range owners {
			o.Close()
		}
		return err
	}
	for _, table := range r.cc.tables() {
		var owner serving.Owner = serving.Static{Shard: 0}
		if r.cfg.ZooKeeper != "" {
			dial := serving.DialOwner
			if r.cc.Virtual > 0 {
				dial = serving.DialHashOwner
			}
			var err error
			if owner, err = dial(ctx, r.cfg.ZooKeeper, table, r.cc.DC, r.cc.Host, r.addr, r.cc.Shards, r.log); err != nil {
				return fail(err)
			}
		}
		owners = append(owners, owner)
		var dir string
		if r.cc.onDisk(table) {
			dir = filepath.Join(r.cfg.DataDir, "cache", table)
		}
		srv, err := serving.NewServer(serving.ServerConfig{Cluster: r.kafka, Table: table, Shards: r.cc.Shards, Virtual: r.cc.Virtual,
			DC: r.cc.DC, Host: r.cc.Host, Owner: owner, Dir: dir, Metrics: r.reg, Logger: r.log})
		if err != nil {
			return fail(err)
		}
		servers = append(servers, srv)
	}
	mux := serving.NewMux(servers...)
	r.current.Store(mux)
	return mux.Serve(ctx, r.cfg.Limits.Bound(ln), r.cfg.Limits.GRPCServer(r.authn.GRPCOptions(auth.TableReaders)...))
}

// ready reports whether the current run holds a loaded shard of every
// table.
func (r *cacheRunner) ready() bool {
	m := r.current.Load()
	return m != nil && m.Ready()
}

// advertised returns the address clients reach a listener at: its own,
// or for one on every interface, the first non-loopback address of the
// machine with its port.
func advertised(a *net.TCPAddr) string {
	if !a.IP.IsUnspecified() {
		return a.String()
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range addrs {
			if ipn, ok := ia.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return net.JoinHostPort(ipn.IP.String(), fmt.Sprint(a.Port))
			}
		}
	}
	host, _ := os.Hostname()
	return net.JoinHostPort(host, fmt.Sprint(a.Port))
}
