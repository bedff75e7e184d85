package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/offerlog/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/serving"
)

// ComponentCache is the serving cache's server.
const ComponentCache = "cache"

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
	}
	return nil
}

// runCache starts a cache server and returns its address and a channel
// closed once it holds a loaded shard.
func runCache(ctx context.Context, sup *supervisor, cfg Config, brokers []string, reg *metrics.Registry, log *slog.Logger, authn *auth.Authenticator) (string, <-chan struct{}, error) {
	cc := cfg.Cache
	if cc.Host == "" {
		cc.Host, _ = os.Hostname()
	}
	ln, err := net.Listen("tcp", cc.Addr)
	if err != nil {
		return "", nil, fmt.Errorf("cache: %w", err)
	}
	addr := advertised(ln.Addr().(*net.TCPAddr))
	var servers []*serving.Server
	for _, table := range cc.tables() {
		var owner serving.Owner = serving.Static{Shard: 0}
		if cfg.ZooKeeper != "" {
			if owner, err = serving.DialOwner(ctx, cfg.ZooKeeper, table, cc.DC, cc.Host, addr, cc.Shards, log); err != nil {
				ln.Close()
				return "", nil, err
			}
		}
		srv, err := serving.NewServer(serving.ServerConfig{Brokers: brokers, Table: table, Shards: cc.Shards, DC: cc.DC,
			Host: cc.Host, Owner: owner, Metrics: reg, Logger: log})
		if err != nil {
			ln.Close()
			return "", nil, err
		}
		servers = append(servers, srv)
	}
	srv := serving.NewMux(servers...)
	sup.Go(ctx, ComponentCache, true, func(ctx context.Context) error {
		return srv.Serve(ctx, cfg.Limits.Bound(ln), cfg.Limits.GRPCServer(authn.GRPCOptions(auth.AdminOnly)...))
	})
	ready := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for !srv.Ready() {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		close(ready)
	}()
	return addr, ready, nil
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
